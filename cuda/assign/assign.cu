#include "assign/assign.cuh"

#include "assign/fast_assign.cuh"
#include "assign/single_window.cuh"
#include "math/warp_math.cuh"
#include "runtime/cuda_check.hpp"
#include "runtime/shared_memory.hpp"

#include <math_constants.h>

#include <algorithm>
#include <cmath>

namespace vlattice::cuda {

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ Candidate merged(const Candidate* __restrict__ candidates, int splits, std::size_t n,
                                            std::size_t i) {
    Candidate c = candidates[i];
    for (int s = 1; s < splits; ++s) {
        merge(c, candidates[static_cast<std::size_t>(s) * n + i]);
    }
    return c;
}

struct Bound {
    const float* point_norms;
    const float* anchor_norms;
    const unsigned* max_anchor_norm_bits;
    float factor;    // the fast kernel's rounding factor
    float absolute;  // plus this much, for two distances (the half kernels' values below the normal range)
    const unsigned* overflow;  // optional: kHalfOverflow set means the fast distances bound nothing
    bool repair;     // false: the fast argmin stands unless the operands overflowed
    // The single product's values (||ch||^2 - 2 xh.ch) are bounded by its own window instead.
    bool single;
    SingleWindowArgs single_window;
    std::size_t n;
};

// The fast distance of a Candidate value (which leaves out ||x||^2) for point i.
__device__ __forceinline__ float distance_of(float value, std::size_t i, const Bound& bound) {
    return bound.point_norms[i] + value;
}

// Any anchor whose fast distance exceeds this cannot be nearer than the best in exact arithmetic:
// the CPU's bound, with the fast kernel's factor.
__device__ __forceinline__ float threshold_of(const Candidate& c, std::size_t i, const Bound& bound) {
    const float max_anchor_norm = __uint_as_float(*bound.max_anchor_norm_bits);
    return distance_of(c.dist[0], i, bound) +
           bound.factor * (2.0f * bound.point_norms[i] + bound.anchor_norms[c.id[0]] + max_anchor_norm) +
           bound.absolute;
}

// Sorts point i by how much repair its candidate needs: certain (no other anchor within the bound
// of the best), short list (every anchor within the bound is among the kept ones; listed from the
// front of `uncertain`), or all anchors (listed from the back).
__device__ __forceinline__ void sort_for_repair(const Candidate& c, std::uint32_t i, std::size_t n, const Bound& bound,
                                                std::uint32_t* __restrict__ uncertain,
                                                unsigned* __restrict__ uncertain_counts) {
    if (bound.overflow != nullptr && (*bound.overflow & kHalfOverflow) != 0) {
        uncertain[n - 1 - atomicAdd(&uncertain_counts[1], 1u)] = i;
        return;
    }
    if (!bound.repair) {
        return;
    }
    // Whether a value is within the bound of the best.
    const RowWindow window = bound.single ? single_row_window(bound.single_window, i, bound.n, false) : RowWindow{};
    auto within = [&](float value) {
        if (bound.single) {
            return value <= c.dist[0] + window(c.dist[0]);
        }
        return distance_of(value, i, bound) <= threshold_of(c, i, bound);
    };
    if (within(c.dist[1])) {
        if (!within(c.next)) {
            uncertain[atomicAdd(&uncertain_counts[0], 1u)] = i;
        } else {
            uncertain[n - 1 - atomicAdd(&uncertain_counts[1], 1u)] = i;
        }
    }
}

// Combines the splits of each point's candidates and sorts the point for the repair.
__global__ void resolve_kernel(const Candidate* __restrict__ candidates, int splits, std::size_t n, Bound bound,
                               std::uint32_t* __restrict__ chosen, std::uint32_t* __restrict__ uncertain,
                               unsigned* __restrict__ uncertain_counts) {
    const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= n) {
        return;
    }
    const Candidate c = merged(candidates, splits, n, i);
    chosen[i] = c.id[0];
    sort_for_repair(c, static_cast<std::uint32_t>(i), n, bound, uncertain, uncertain_counts);
}

// The narrowing's inputs: the batch [first, first + count) of the all-anchor list (copied aside),
// their ids, norms and 16-bit rows packed in list order. A thread per 8 values of a row (one
// 16-byte copy).
constexpr int kRowGroup = 8;

__global__ void pack_listed_kernel(std::size_t first, std::size_t count, int stride, const float* __restrict__ norms,
                                   const std::uint16_t* __restrict__ head, const std::uint16_t* __restrict__ tail,
                                   NarrowBuffers out) {
    const int groups = stride / kRowGroup;
    const std::size_t item = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    const std::size_t u = item / groups;
    if (u >= count) {
        return;
    }
    const std::uint32_t i = out.list[first + u];
    const int k = static_cast<int>(item % groups) * kRowGroup;
    if (k == 0) {
        out.ids[u] = i;
        out.norms[u] = norms[i];
    }
    const std::size_t from = static_cast<std::size_t>(i) * stride + k;
    const std::size_t to = u * stride + k;
    *reinterpret_cast<uint4*>(out.point_head + to) = *reinterpret_cast<const uint4*>(head + from);
    if (tail != nullptr) {
        *reinterpret_cast<uint4*>(out.point_tail + to) = *reinterpret_cast<const uint4*>(tail + from);
    }
}

// The narrowed candidates replace the first pass's (all splits of them, for the repair to read) and
// the points are sorted again, by the narrower bound.
__global__ void resolve_narrowed_kernel(const Candidate* __restrict__ narrowed, int narrowed_splits,
                                        const std::uint32_t* __restrict__ ids, std::size_t count,
                                        Candidate* __restrict__ candidates, int splits, std::size_t n, Bound bound,
                                        std::uint32_t* __restrict__ chosen, std::uint32_t* __restrict__ uncertain,
                                        unsigned* __restrict__ uncertain_counts) {
    const std::size_t u = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (u >= count) {
        return;
    }
    const std::uint32_t i = ids[u];
    const Candidate c = merged(narrowed, narrowed_splits, count, u);
    chosen[i] = c.id[0];
    candidates[i] = c;
    for (int s = 1; s < splits; ++s) {
        candidates[static_cast<std::size_t>(s) * n + i] = empty_candidate();
    }
    sort_for_repair(c, i, n, bound, uncertain, uncertain_counts);
}

// One warp per short-list point scores all its kept anchors in double, all at once: those within the
// bound are among them, and any others are real anchors too, which cannot move the exact argmin.
// (distance, anchor) order keeps the lowest anchor on ties, as on the CPU. The list's order depends
// on scheduling, but each point's result does not. Typed rows, so that the loads of a stride are in
// flight together.
template <RowType kType>
__global__ void __launch_bounds__(kThreads)
    rescore_short_kernel(PointRows points, const float* __restrict__ anchors, int d,
                         const Candidate* __restrict__ candidates, int splits, std::size_t n,
                         const std::uint32_t* __restrict__ uncertain, const unsigned* __restrict__ uncertain_counts,
                         std::uint32_t* __restrict__ chosen) {
    const int lane = threadIdx.x % kWarp;
    const unsigned warps = gridDim.x * (blockDim.x / kWarp);
    const unsigned count = uncertain_counts[0];
    for (unsigned u = (blockIdx.x * blockDim.x + threadIdx.x) / kWarp; u < count; u += warps) {
        const std::uint32_t i = uncertain[u];
        const Candidate c = merged(candidates, splits, n, i);
        // Empty places are filled with the best, which cannot change the outcome.
        const float* rows[kKeep];
        std::uint32_t ids[kKeep];
#pragma unroll
        for (int s = 0; s < kKeep; ++s) {
            ids[s] = c.id[s] != kNoAnchor ? c.id[s] : c.id[0];
            rows[s] = anchors + static_cast<std::size_t>(ids[s]) * d;
        }
        double dist[kKeep];
        warp_squared_distances<kKeep>(TypedPointRow<kType>{points, i}, rows, d, lane, dist);
        double best = dist[0];
        std::uint32_t best_j = ids[0];
#pragma unroll
        for (int s = 1; s < kKeep; ++s) {
            if (dist[s] < best || (dist[s] == best && ids[s] < best_j)) {
                best = dist[s];
                best_j = ids[s];
            }
        }
        if (lane == 0) {
            chosen[i] = best_j;
        }
    }
}

// One block per point with more than kKeep anchors within the bound: its warps share the anchors,
// a few at a time so that their loads overlap, in double; then the block takes the smallest
// (distance, anchor).
constexpr int kAnchorsAtOnce = 4;

template <RowType kType>
__global__ void __launch_bounds__(kThreads)
    rescore_all_kernel(PointRows points, const float* __restrict__ anchors, std::uint32_t m, int d,
                       bool exclude_self, std::size_t n, const std::uint32_t* __restrict__ uncertain,
                       const unsigned* __restrict__ uncertain_counts, std::uint32_t* __restrict__ chosen) {
    constexpr int kWarps = kThreads / kWarp;
    __shared__ double warp_best[kWarps];
    __shared__ std::uint32_t warp_best_j[kWarps];
    const int lane = threadIdx.x % kWarp;
    const int warp = threadIdx.x / kWarp;
    const unsigned count = uncertain_counts[1];
    for (unsigned u = blockIdx.x; u < count; u += gridDim.x) {
        const std::uint32_t i = uncertain[n - 1 - u];
        const TypedPointRow<kType> x{points, i};
        double best = CUDART_INF;
        std::uint32_t best_j = m;
        for (std::uint32_t j0 = static_cast<std::uint32_t>(warp) * kAnchorsAtOnce; j0 < m;
             j0 += kWarps * kAnchorsAtOnce) {
            // Past the end, a group repeats its first anchor, which cannot change the outcome.
            const float* rows[kAnchorsAtOnce];
            std::uint32_t ids[kAnchorsAtOnce];
#pragma unroll
            for (int s = 0; s < kAnchorsAtOnce; ++s) {
                ids[s] = j0 + s < m ? j0 + s : j0;
                rows[s] = anchors + static_cast<std::size_t>(ids[s]) * d;
            }
            double dist[kAnchorsAtOnce];
            warp_squared_distances<kAnchorsAtOnce>(x, rows, d, lane, dist);
#pragma unroll
            for (int s = 0; s < kAnchorsAtOnce; ++s) {
                if (exclude_self && ids[s] == i) {
                    continue;
                }
                if (dist[s] < best || (dist[s] == best && ids[s] < best_j)) {
                    best = dist[s];
                    best_j = ids[s];
                }
            }
        }
        if (lane == 0) {
            warp_best[warp] = best;
            warp_best_j[warp] = best_j;
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            for (int w = 1; w < kWarps; ++w) {
                if (warp_best[w] < best || (warp_best[w] == best && warp_best_j[w] < best_j)) {
                    best = warp_best[w];
                    best_j = warp_best_j[w];
                }
            }
            chosen[i] = best_j;
        }
        __syncthreads();  // warp_best is rewritten for the next point
    }
}

}  // namespace

GpuShape gpu_shape(int gpu) {
    int multiprocessors = 0;
    int l2_bytes = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, gpu));
    CUDA_CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, gpu));
    return {multiprocessors, static_cast<std::size_t>(l2_bytes), block_shared_memory(gpu)};
}

AssignPlan plan_assign(std::size_t n, std::size_t m, int d, const GpuShape& gpu) {
    const std::size_t point_tiles = ceil_div(n, kFastTile);
    const std::size_t anchor_tiles = ceil_div(m, kFastTile);
    const auto multiprocessors = static_cast<std::size_t>(std::max(gpu.multiprocessors, 1));
    std::size_t wanted = ceil_div(2 * multiprocessors, point_tiles);
    if (const int stride = half_stride(d); stride > kKeptRowValues) {
        // The point rows that the running blocks stream, a block per multiprocessor of kSinglePoints
        // rows of 16-bit values, should fit in the part of L2 that the anchors leave, and at least
        // in half of it; the single-product kernel numbers its blocks so that a point tile's splits
        // run side by side (the other fast kernels just get the extra splits, which they merge like
        // any others). Half of L2 gave 3 splits where there was 1 at Fashion-MNIST (assign 0.457 ->
        // 0.425 ms) and at 1M x 768 with 16,384 anchors (85.9 -> 78.1); all of L2, 2 splits, 0.413
        // and 85.9: Fashion-MNIST's 1,024 anchors (1.6 MB of heads) leave L2 to the rows, 1M x 768's
        // 16,384 (25 MB) half of it.
        const std::size_t rows_bytes = multiprocessors * kSinglePoints * 2 * static_cast<std::size_t>(stride);
        const std::size_t anchor_bytes = m * 2 * static_cast<std::size_t>(stride);
        const std::size_t room = gpu.l2_bytes > anchor_bytes ? gpu.l2_bytes - anchor_bytes : 0;
        wanted = std::max(wanted, ceil_div(rows_bytes, std::max<std::size_t>({room, gpu.l2_bytes / 2, 1})));
    }
    std::size_t splits = std::clamp<std::size_t>(wanted, 1, std::max<std::size_t>(anchor_tiles, 1));
    const std::size_t tiles_per_split = ceil_div(anchor_tiles, splits);
    splits = ceil_div(anchor_tiles, tiles_per_split);
    return {static_cast<int>(splits), static_cast<int>(tiles_per_split)};
}

namespace {

// The fast kernel of args.path, and the bound on its distances.
Bound bound_of(const AssignArgs& args) {
    Bound bound{args.point_norms, args.anchor_norms, args.max_anchor_norm_bits, 0.0f, 0.0f, nullptr, args.repair,
                false, {}, args.n};
    if (args.path == FastPath::fp32) {
        bound.factor = fp32_rounding_factor(args.d);
        return bound;
    }
    bound.absolute = 2.0f * half_absolute_bound(args.d, args.half.exponent);
    bound.overflow = args.half.anchor_flags;
    if (args.path == FastPath::half_single) {
        bound.single = true;
        bound.single_window.point_head_norms = args.half.point_head_norms;
        bound.single_window.point_roundings = args.half.point_roundings;
        bound.single_window.anchor_maxima = args.half.anchor_head_maxima;
        bound.single_window.accumulation = single_accumulation_factor(args.d);
        bound.single_window.absolute = bound.absolute;
        bound.single_window.repair = args.repair;
        return bound;
    }
    bound.factor = half_rounding_factor(args.half.type, half_products(args), args.d);
    return bound;
}

void launch_fast(const AssignArgs& args, cudaStream_t stream) {
    if (args.path == FastPath::fp32) {
        FastAssignArgs fast;
        fast.points = args.points;
        fast.anchors = args.anchors;
        fast.anchor_norms = args.anchor_norms;
        fast.n = args.n;
        fast.m = args.m;
        fast.d = args.d;
        fast.exclude_self = args.exclude_self;
        fast.splits = args.plan.splits;
        fast.tiles_per_split = args.plan.tiles_per_split;
        fast.candidates = args.candidates;
        launch_fast_assign_fp32(fast, stream);
        return;
    }
    if (args.exclude_self && args.path == FastPath::half_single) {
        throw Error("fast assign: the single-product kernel does not leave a point's own row out");
    }
    const HalfOperands& h = args.half;
    HalfAssignArgs fast;
    fast.type = h.type;
    fast.products = half_products(args);
    fast.point_head = h.point_head;
    fast.point_tail = h.point_tail;
    fast.anchor_head = h.anchor_head;
    fast.anchor_tail = h.anchor_tail;
    fast.point_norms = args.point_norms;
    fast.anchor_norms = fast.products == 1 ? h.anchor_head_norms : args.anchor_norms;
    fast.max_anchor_norm_bits = args.max_anchor_norm_bits;
    const Bound bound = bound_of(args);
    if (bound.single) {
        fast.single = bound.single_window;
        fast.prior = args.prior;
    } else if (args.repair) {
        // Wider than the resolve's threshold by what the kernel's own float comparisons can round
        // away: 0.1 % of it, and 8 units of 2^-24 of the norms.
        fast.window_factor = bound.factor * 1.001f + 8.0f * std::ldexp(1.0f, -24);
        fast.window_absolute = bound.absolute * 1.001f;
    }
    fast.n = args.n;
    fast.m = args.m;
    fast.exclude_self = args.exclude_self;
    fast.stride = half_stride(args.d);
    fast.scale = std::ldexp(1.0f, 1 - 2 * h.exponent);
    fast.splits = args.plan.splits;
    fast.tiles_per_split = args.plan.tiles_per_split;
    fast.candidates = args.candidates;
    fast.engine = args.engine;
    fast.shared_limit = args.gpu.shared_limit;
    launch_fast_assign_half(fast, stream);
}

}  // namespace

int half_products(const AssignArgs& args) {
    return args.path == FastPath::half_single ? 1 : args.half.point_tail == nullptr ? 2 : 3;
}

void launch_shortlist(const AssignArgs& args, cudaStream_t stream) {
    if (args.n == 0 || args.m == 0) {
        return;
    }
    launch_fast(args, stream);
    constexpr int kResolveThreads = 256;
    resolve_kernel<<<static_cast<unsigned>(ceil_div(args.n, kResolveThreads)), kResolveThreads, 0, stream>>>(
        args.candidates, args.plan.splits, args.n, bound_of(args), args.chosen, args.uncertain,
        args.uncertain_counts);
    check_launch("resolve_kernel", stream);
}

bool worth_narrowing(std::size_t all_anchor_points, std::size_t m, int d) {
    return static_cast<double>(all_anchor_points) * static_cast<double>(m) * d >= kNarrowValues;
}

void launch_narrow(const AssignArgs& args, std::size_t total, std::size_t first, std::size_t count,
                   const NarrowBuffers& scratch, cudaStream_t stream) {
    if (count == 0) {
        return;
    }
    if (args.path != FastPath::half_single || args.n < total || total < first + count) {
        throw Error("assign: only the all-anchor points of a single-product pass can be narrowed");
    }
    if (first == 0) {
        // The points go back into the list, sorted anew, while later batches are still to be read.
        CUDA_CHECK(cudaMemcpyAsync(scratch.list, args.uncertain + (args.n - total), total * sizeof(std::uint32_t),
                                   cudaMemcpyDeviceToDevice, stream));
        CUDA_CHECK(cudaMemsetAsync(args.uncertain_counts + 1, 0, sizeof(unsigned), stream));
    }
    const int stride = half_stride(args.d);
    constexpr int kPackThreads = 256;
    const std::size_t items = count * static_cast<std::size_t>(stride / kRowGroup);
    pack_listed_kernel<<<static_cast<unsigned>(ceil_div(items, kPackThreads)), kPackThreads, 0, stream>>>(
        first, count, stride, args.point_norms, args.half.point_head, args.half.point_tail, scratch);
    check_launch("pack_listed_kernel", stream);

    AssignArgs split = args;
    split.path = FastPath::half_split;
    AssignArgs listed = split;
    listed.n = count;
    listed.point_norms = scratch.norms;
    listed.half.point_head = scratch.point_head;
    listed.half.point_tail = args.half.point_tail != nullptr ? scratch.point_tail : nullptr;
    listed.plan = plan_assign(count, args.m, args.d, args.gpu);
    listed.candidates = scratch.candidates;
    launch_fast(listed, stream);

    constexpr int kResolveThreads = 256;
    resolve_narrowed_kernel<<<static_cast<unsigned>(ceil_div(count, kResolveThreads)), kResolveThreads, 0, stream>>>(
        scratch.candidates, listed.plan.splits, scratch.ids, count, args.candidates, args.plan.splits, args.n,
        bound_of(split), args.chosen, args.uncertain, args.uncertain_counts);
    check_launch("resolve_narrowed_kernel", stream);
}

void launch_repair(const AssignArgs& args, cudaStream_t stream) {
    if (args.n == 0 || args.m == 0) {
        return;
    }
    // Enough warps to fill the GPU; the counts of uncertain points stay on the device.
    const unsigned rescore_blocks = static_cast<unsigned>(std::max(args.gpu.multiprocessors, 1)) * 8;
    with_row_type(args.points.type, [&](auto type) {
        constexpr RowType kType = decltype(type)::value;
        if (args.repair) {
            rescore_short_kernel<kType><<<rescore_blocks, kThreads, 0, stream>>>(
                args.points, args.anchors, args.d, args.candidates, args.plan.splits, args.n, args.uncertain,
                args.uncertain_counts, args.chosen);
            check_launch("rescore_short_kernel", stream);
        }
        rescore_all_kernel<kType><<<rescore_blocks, kThreads, 0, stream>>>(
            args.points, args.anchors, static_cast<std::uint32_t>(args.m), args.d, args.exclude_self, args.n,
            args.uncertain, args.uncertain_counts, args.chosen);
        check_launch("rescore_all_kernel", stream);
    });
}

}  // namespace vlattice::cuda
