#include "seed_anchors.cuh"

#include "cuda_check.hpp"
#include "ordered_distance.cuh"
#include "warp_math.cuh"

namespace vlattice::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kRowsPerBlock = kThreads / kDistanceLanes;  // one half warp per row

// The row this half warp handles, and the thread's lane in it.
__device__ __forceinline__ std::size_t half_warp_row() {
    return static_cast<std::size_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kDistanceLanes;
}

// Anchor j becomes a copy of the sample point at *chosen, by the threads of one block.
__device__ void copy_pick(const SeedArgs& a, std::size_t j) {
    const float* from = a.sample + static_cast<std::size_t>(*a.chosen) * a.d;
    float* to = a.anchors + j * a.d;
    for (int k = threadIdx.x; k < a.d; k += blockDim.x) {
        to[k] = from[k];
    }
}

__global__ void first_pick_kernel(SeedArgs a) {
    copy_pick(a, 0);
}

__global__ void first_weights_kernel(SeedArgs a) {
    const std::size_t i = half_warp_row();
    const int l = threadIdx.x % kDistanceLanes;
    // Rows past the end compute on row 0 so that every thread reaches the shuffles.
    const std::size_t row = i < a.s ? i : 0;
    const double dist = ordered_squared_distance(a.sample + row * a.d, a.anchors, a.d, l);
    if (i < a.s && l == 0) {
        a.nearest[i] = dist;
        a.owner[i] = 0;
    }
}

__global__ void gap_kernel(SeedArgs a, std::size_t j) {
    const std::size_t p = half_warp_row();
    const int l = threadIdx.x % kDistanceLanes;
    const std::size_t row = p < j ? p : 0;
    const double dist = ordered_squared_distance(a.anchors + row * a.d, a.anchors + j * a.d, a.d, l);
    if (p < j && l == 0) {
        a.gap[p] = sqrt(dist);
    }
}

// A point whose pick lies at least twice its distance from pick j is no nearer to j (triangle
// inequality), and is skipped exactly where the CPU skips it. The skip is the same for the whole
// half warp, so the shuffles inside stay in step.
__global__ void lower_weights_kernel(SeedArgs a, std::size_t j) {
    const std::size_t i = half_warp_row();
    const int l = threadIdx.x % kDistanceLanes;
    const std::size_t row = i < a.s ? i : 0;
    const double current = a.nearest[row];
    const bool near = i < a.s && a.gap[a.owner[row]] < 2.0 * sqrt(current);
    // Both half warps of a warp take part in the shuffles, so the distance is computed when either
    // needs it.
    if (__any_sync(kFullMask, near)) {
        const double dist = ordered_squared_distance(a.sample + row * a.d, a.anchors + j * a.d, a.d, l);
        if (near && l == 0 && dist < current) {
            a.nearest[i] = dist;
            a.owner[i] = static_cast<std::uint32_t>(j);
        }
    }
}

__device__ void pick_next(const SeedArgs& a, std::size_t j) {
    const std::size_t blocks = seed_block_count(a.s);
    double total = 0.0;
    for (std::size_t b = 0; b < blocks; ++b) {
        total = __dadd_rn(total, a.block_sums[b]);
    }
    if (!(total > 0.0)) {
        *a.degenerate = 1;
        *a.chosen = 0;
        return;
    }
    const double target = __dmul_rn(a.uniforms[j], total);
    double running = 0.0;
    std::size_t block = 0;
    while (block + 1 < blocks && __dadd_rn(running, a.block_sums[block]) <= target) {
        running = __dadd_rn(running, a.block_sums[block++]);
    }
    const std::size_t begin = block * kSeedBlock;
    const std::size_t end = begin + kSeedBlock < a.s ? begin + kSeedBlock : a.s;
    std::size_t last_positive = begin;
    for (std::size_t i = begin; i < end; ++i) {
        if (a.nearest[i] > 0.0) {
            running = __dadd_rn(running, a.nearest[i]);
            last_positive = i;
            if (running > target) {
                *a.chosen = static_cast<std::uint32_t>(i);
                return;
            }
        }
    }
    *a.chosen = static_cast<std::uint32_t>(last_positive);
}

// One block: each thread sums whole blocks of weights in order, then thread 0 adds the block sums in
// order and walks to the target as DSquaredSampler::pick does; then the block copies pick j + 1.
__global__ void __launch_bounds__(kThreads) pick_kernel(SeedArgs a, std::size_t j) {
    const std::size_t blocks = seed_block_count(a.s);
    for (std::size_t b = threadIdx.x; b < blocks; b += blockDim.x) {
        const std::size_t end = (b + 1) * kSeedBlock < a.s ? (b + 1) * kSeedBlock : a.s;
        double sum = 0.0;
        for (std::size_t i = b * kSeedBlock; i < end; ++i) {
            sum = __dadd_rn(sum, a.nearest[i]);
        }
        a.block_sums[b] = sum;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        pick_next(a, j);
    }
    __syncthreads();
    copy_pick(a, j + 1);
}

unsigned half_warp_blocks(std::size_t rows) {
    return static_cast<unsigned>(ceil_div(rows, kRowsPerBlock));
}

}  // namespace

void launch_seed_anchors(const SeedArgs& a, cudaStream_t stream) {
    first_pick_kernel<<<1, kThreads, 0, stream>>>(a);
    check_launch("first_pick_kernel", stream);
    for (std::size_t j = 0; j < a.m; ++j) {
        if (j == 0) {
            first_weights_kernel<<<half_warp_blocks(a.s), kThreads, 0, stream>>>(a);
            check_launch("first_weights_kernel", stream);
        } else {
            gap_kernel<<<half_warp_blocks(j), kThreads, 0, stream>>>(a, j);
            check_launch("gap_kernel", stream);
            lower_weights_kernel<<<half_warp_blocks(a.s), kThreads, 0, stream>>>(a, j);
            check_launch("lower_weights_kernel", stream);
        }
        if (j + 1 < a.m) {
            pick_kernel<<<1, kThreads, 0, stream>>>(a, j);
            check_launch("pick_kernel", stream);
        }
    }
}

}  // namespace vlattice::cuda
