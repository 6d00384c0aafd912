#include "seeding/seed_anchors.cuh"

#include "math/ordered_distance.cuh"
#include "math/ordered_sums.cuh"
#include "math/warp_math.cuh"
#include "runtime/cuda_check.hpp"

#include <cooperative_groups.h>

#include <algorithm>

namespace vlattice::cuda {

namespace {

namespace cg = cooperative_groups;

constexpr int kThreads = 256;
constexpr int kRowsPerBlock = kThreads / kDistanceLanes;  // one half warp per row
using Sums = OrderedSums<kThreads>;

// The round's state every block keeps for itself: the newest pick's place in the sample.
struct Round {
    std::uint32_t chosen;
    bool degenerate;
};

// work(row, valid, lane) for rows [0, count), a half warp per row across the whole grid.
template <class Work>
__device__ void for_rows(std::size_t count, Work work) {
    for_rows_by_half_warps(count, static_cast<std::size_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kDistanceLanes,
                           static_cast<std::size_t>(gridDim.x) * kRowsPerBlock, work);
}

// The last k < count with values[k] > 0, or 0.
__device__ std::size_t last_positive(const double* values, std::size_t count) {
    __shared__ unsigned long long last;
    if (threadIdx.x == 0) {
        last = 0;
    }
    __syncthreads();
    for (std::size_t k = threadIdx.x; k < count; k += blockDim.x) {
        if (values[k] > 0.0) {
            atomicMax(&last, static_cast<unsigned long long>(k));
        }
    }
    __syncthreads();
    const std::size_t found = last;
    __syncthreads();
    return found;
}

// Weights in the block of weights starting at `begin`.
__device__ std::size_t weights_from(const SeedArgs& a, std::size_t begin) {
    return a.s - begin < kSeedBlock ? a.s - begin : kSeedBlock;
}

// gap[p] = ||pick p - newest|| for the earlier picks p < j.
__device__ void measure_gaps(const SeedArgs& a, std::size_t j, const float* newest) {
    for_rows(j, [&](std::size_t p, bool valid, int l) {
        const double dist = ordered_squared_distance(a.anchors + p * a.d, newest, a.d, l);
        if (valid && l == 0) {
            a.gap[p] = sqrt(dist);
        }
    });
}

// Lowers each weight that the newest pick j lowers. A point whose pick lies at least twice its
// distance from pick j is no nearer to j (triangle inequality), and is skipped exactly where the CPU
// skips it; the skip is the same for the whole half warp, so the shuffles inside stay in step.
__device__ void lower_weights(const SeedArgs& a, std::size_t j, const float* newest) {
    for_rows(a.s, [&](std::size_t i, bool valid, int l) {
        if (j == 0) {
            const double dist = ordered_squared_distance(a.sample + i * a.d, newest, a.d, l);
            if (valid && l == 0) {
                a.nearest[i] = dist;
                a.owner[i] = 0;
            }
            return;
        }
        const double current = a.nearest[i];
        const bool near = valid && a.gap[a.owner[i]] < 2.0 * sqrt(current);
        // Both half warps of a warp take part in the shuffles, so the distance is computed when
        // either needs it.
        if (__any_sync(kFullMask, near)) {
            const double dist = ordered_squared_distance(a.sample + i * a.d, newest, a.d, l);
            if (near && l == 0 && dist < current) {
                a.nearest[i] = dist;
                a.owner[i] = static_cast<std::uint32_t>(j);
            }
        }
    });
}

// Each block of weights summed in order, as DSquaredSampler::refresh_block does, with the lowest
// set bit among its weights.
__device__ void sum_blocks(const SeedArgs& a, Sums& sums) {
    const std::size_t blocks = seed_block_count(a.s);
    for (std::size_t b = blockIdx.x; b < blocks; b += gridDim.x) {
        const std::size_t begin = b * kSeedBlock;
        const Sums::Bound bound = sums.bound(a.nearest + begin, weights_from(a, begin), 0.0);
        const double sum = sums.total(a.nearest + begin, weights_from(a, begin), 0.0, bound);
        if (threadIdx.x == 0) {
            a.block_sums[b] = sum;
            a.block_lows[b] = bound.low;
        }
    }
}

// The pick after round j, as DSquaredSampler::total and pick: the block sums added in order, the walk
// to the target weight over the block sums (never past the last block), then within the block it
// lands in. Every block of threads does this itself, with the same additions, so all know the pick
// without waiting for one another. When the blocks' bounds prove that no running sum of all the
// weights rounds, the total and both walks need no proof of their own.
__device__ void pick_next(const SeedArgs& a, std::size_t j, Sums& sums, Round& round) {
    const std::size_t blocks = seed_block_count(a.s);
    const Sums::Bound whole = sums.combine(a.block_sums, a.block_lows, blocks);
    const bool proven = Sums::nothing_rounds(whole);
    const double total = proven ? whole.sum : sums.total(a.block_sums, blocks, 0.0);
    const double target = __dmul_rn(a.uniforms[j], total);
    const Landing block = sums.land(a.block_sums, blocks - 1, 0.0, target, proven);
    const std::size_t begin = block.index * kSeedBlock;
    const std::size_t size = weights_from(a, begin);
    const Landing weight = sums.land(a.nearest + begin, size, block.before, target, proven);
    // The block sum and the walk round differently; the target may fall between the two.
    const std::size_t chosen = weight.index < size ? weight.index : last_positive(a.nearest + begin, size);
    if (threadIdx.x == 0) {
        round.degenerate = !(total > 0.0);
        round.chosen = static_cast<std::uint32_t>(begin + chosen);
    }
    __syncthreads();
}

// All of k-means++ in one cooperative launch; grid-wide barriers separate the phases of a round.
__global__ void __launch_bounds__(kThreads) seed_kernel(SeedArgs a) {
    __shared__ Sums::TempStorage sums_storage;
    __shared__ Round round;
    Sums sums(sums_storage);
    const cg::grid_group grid = cg::this_grid();
    if (threadIdx.x == 0) {
        round.chosen = *a.chosen;
        round.degenerate = false;
    }
    __syncthreads();
    for (std::size_t j = 0; j < a.m; ++j) {
        const float* newest = a.sample + static_cast<std::size_t>(round.chosen) * a.d;
        if (blockIdx.x == 0) {
            for (int k = threadIdx.x; k < a.d; k += blockDim.x) {
                a.anchors[j * a.d + k] = newest[k];
            }
        }
        measure_gaps(a, j, newest);
        grid.sync();
        lower_weights(a, j, newest);
        if (j + 1 == a.m) {
            break;
        }
        grid.sync();
        sum_blocks(a, sums);
        grid.sync();
        pick_next(a, j, sums, round);
        if (round.degenerate) {
            // Every block saw the same zero total; the caller takes over.
            if (blockIdx.x == 0 && threadIdx.x == 0) {
                *a.degenerate = 1;
            }
            return;
        }
    }
}

// k-means++ for rows of at most kFewDims coordinates (a product code's sub-spaces), on a grid of one
// block per block of weights (seed_block_count(s) blocks of kSeedBlock threads): each thread keeps its
// row, its weight and its pick in registers, and each block refreshes its weights' sum itself, only
// when one of them fell. A round then takes two grid-wide barriers instead of three, on a grid a
// fraction of the GPU's size, so that the sub-space fits on sibling streams seed side by side. The
// picks are seed_kernel's: the same distances (ordered_squared_distance_alone adds as the half warps
// do), skips, sums and walk.
constexpr int kFewDims = 32;
static_assert(kThreads == kSeedBlock, "a block of threads per block of weights");

__global__ void __launch_bounds__(kThreads) seed_few_dims_kernel(SeedArgs a) {
    __shared__ Sums::TempStorage sums_storage;
    __shared__ Round round;
    Sums sums(sums_storage);
    const cg::grid_group grid = cg::this_grid();
    const std::size_t begin = static_cast<std::size_t>(blockIdx.x) * kSeedBlock;
    const std::size_t i = begin + threadIdx.x;
    const bool mine = i < a.s;
    float row[kFewDims];
#pragma unroll
    for (int k = 0; k < kFewDims; ++k) {
        row[k] = mine && k < a.d ? a.sample[i * a.d + k] : 0.0f;
    }
    double nearest = 0.0;
    std::uint32_t owner = 0;
    if (threadIdx.x == 0) {
        round.chosen = *a.chosen;
        round.degenerate = false;
    }
    __syncthreads();
    const std::size_t thread = static_cast<std::size_t>(blockIdx.x) * kThreads + threadIdx.x;
    const std::size_t threads = static_cast<std::size_t>(gridDim.x) * kThreads;
    for (std::size_t j = 0; j < a.m; ++j) {
        const float* newest = a.sample + static_cast<std::size_t>(round.chosen) * a.d;
        const detail::StoredRow pick{newest};
        if (blockIdx.x == 0 && threadIdx.x < a.d) {
            a.anchors[j * a.d + threadIdx.x] = newest[threadIdx.x];
        }
        for (std::size_t p = thread; p < j; p += threads) {
            const float dist = ordered_squared_distance_alone<kFewDims>(a.anchors + p * a.d, pick, a.d);
            a.gap[p] = sqrt(static_cast<double>(dist));
        }
        grid.sync();
        bool fell = false;
        if (mine && (j == 0 || a.gap[owner] < 2.0 * sqrt(nearest))) {
            const double dist = ordered_squared_distance_alone<kFewDims>(row, pick, a.d);
            if (j == 0 || dist < nearest) {
                nearest = dist;
                owner = static_cast<std::uint32_t>(j);
                a.nearest[i] = dist;
                fell = true;
            }
        }
        if (j + 1 == a.m) {
            break;
        }
        // The barrier also makes the block's stores to a.nearest visible to its own threads.
        if (__syncthreads_or(fell)) {
            const std::size_t count = weights_from(a, begin);
            const Sums::Bound bound = sums.bound(a.nearest + begin, count, 0.0);
            const double sum = sums.total(a.nearest + begin, count, 0.0, bound);
            if (threadIdx.x == 0) {
                a.block_sums[blockIdx.x] = sum;
                a.block_lows[blockIdx.x] = bound.low;
            }
        }
        grid.sync();
        pick_next(a, j, sums, round);
        if (round.degenerate) {
            if (blockIdx.x == 0 && threadIdx.x == 0) {
                *a.degenerate = 1;
            }
            return;
        }
    }
}

}  // namespace

void launch_seed_anchors(const SeedArgs& a, cudaStream_t stream) {
    int device = 0;
    int multiprocessors = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device));
    // Every block must be resident at once for the grid-wide barriers.
    auto resident = [&](auto kernel) {
        int per_multiprocessor = 0;
        CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_multiprocessor, kernel, kThreads, 0));
        return static_cast<std::size_t>(multiprocessors) * static_cast<std::size_t>(per_multiprocessor);
    };
    SeedArgs args = a;
    void* params[] = {&args};
    const std::size_t weight_blocks = seed_block_count(a.s);
    if (a.d <= kFewDims && weight_blocks <= resident(seed_few_dims_kernel)) {
        CUDA_CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(seed_few_dims_kernel),
                                               dim3(static_cast<unsigned>(weight_blocks)), dim3(kThreads), params, 0,
                                               stream));
        check_launch("seed_few_dims_kernel", stream);
        return;
    }
    // Beyond one row per half warp more blocks only make the barriers slower.
    const std::size_t wanted = ceil_div(std::max(a.s, a.m), static_cast<std::size_t>(kRowsPerBlock));
    const dim3 grid(static_cast<unsigned>(std::max<std::size_t>(1, std::min(wanted, resident(seed_kernel)))));
    CUDA_CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(seed_kernel), grid, dim3(kThreads), params, 0,
                                           stream));
    check_launch("seed_kernel", stream);
}

}  // namespace vlattice::cuda
