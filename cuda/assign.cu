#include "assign.cuh"

#include "cuda_check.hpp"
#include "warp_math.cuh"

#include <math_constants.h>

#include <algorithm>
#include <cfloat>

namespace vlattice::cuda {

namespace {

// The fast kernel is a register-tiled SGEMM whose epilogue keeps, per point, the best and the
// second-best distance instead of writing the n x m matrix of distances.
constexpr int kTileM = 128;    // points per block
constexpr int kTileN = 128;    // anchors per tile
constexpr int kTileK = 16;     // coordinates per shared-memory stage
constexpr int kThreads = 256;  // 16 x 16 threads, each owning 8 points x 8 anchors of the tile
constexpr int kSide = 16;
constexpr int kOwn = 8;
// Keeps every shared row 16-byte aligned for the float4 reads, and spreads the transposed stores of
// one warp over more banks.
constexpr int kPad = 4;
constexpr int kRowsPerPass = kThreads / kTileK;         // rows one load pass covers
constexpr int kLoads = kTileM / kRowsPerPass;           // elements per thread per stage, per operand
static_assert(kTileM == kTileN && kTileM == kSide * kOwn, "square tiles of 16 x 16 threads");
static_assert(kSide * kSide == kThreads, "one thread per (row group, column group)");

// Rows (and columns) a thread owns: two groups of four, half a tile apart, so that the float4 reads
// of a quarter warp cover 128 consecutive bytes of shared memory (no bank conflicts).
__device__ __forceinline__ int owned(int group, int r) {
    return r < 4 ? group * 4 + r : kTileM / 2 + group * 4 + (r - 4);
}

// Keeps the three smallest (distance, anchor) pairs in order, so ties go to the lowest anchor.
__device__ __forceinline__ void offer(float dist, std::uint32_t j, Candidate& c) {
    if (dist < c.best || (dist == c.best && j < c.best_j)) {
        c.third = c.second;
        c.second = c.best;
        c.second_j = c.best_j;
        c.best = dist;
        c.best_j = j;
    } else if (dist < c.second || (dist == c.second && j < c.second_j)) {
        c.third = c.second;
        c.second = dist;
        c.second_j = j;
    } else if (dist < c.third) {
        c.third = dist;
    }
}

// The two lists cover disjoint anchors. Whatever other.third displaces, other.best and other.second
// (no larger) have displaced first, so it can only lower the third distance.
__device__ __forceinline__ void merge(Candidate& into, const Candidate& other) {
    offer(other.best, other.best_j, into);
    offer(other.second, other.second_j, into);
    into.third = fminf(into.third, other.third);
}

// Rows past the end and coordinates past d load as zero, which adds nothing to the dot products.
__device__ __forceinline__ void load_stage(const float* __restrict__ rows, std::size_t count, int d,
                                           std::size_t row0, int k, int load_row, float (&out)[kLoads]) {
#pragma unroll
    for (int e = 0; e < kLoads; ++e) {
        const std::size_t row = row0 + load_row + e * kRowsPerPass;
        out[e] = (row < count && k < d) ? rows[row * d + k] : 0.0f;
    }
}

__global__ void __launch_bounds__(kThreads)
    fast_assign_kernel(const float* __restrict__ points, const float* __restrict__ point_norms,
                       const float* __restrict__ anchors, const float* __restrict__ anchor_norms, std::size_t n,
                       std::size_t m, int d, bool exclude_self, int tiles_per_split,
                       Candidate* __restrict__ candidates) {
    __shared__ __align__(16) float xs[kTileK][kTileM + kPad];
    __shared__ __align__(16) float cs[kTileK][kTileN + kPad];
    __shared__ float x_norms[kTileM];

    const int tid = threadIdx.x;
    const int tx = tid % kSide;  // column group: anchors
    const int ty = tid / kSide;  // row group: points
    const int load_k = tid % kTileK;
    const int load_row = tid / kTileK;
    const std::size_t row0 = static_cast<std::size_t>(blockIdx.x) * kTileM;

    for (int r = tid; r < kTileM; r += kThreads) {
        x_norms[r] = row0 + r < n ? point_norms[row0 + r] : 0.0f;
    }

    Candidate top[kOwn];
#pragma unroll
    for (int i = 0; i < kOwn; ++i) {
        top[i] = Candidate{CUDART_INF_F, CUDART_INF_F, CUDART_INF_F, 0, 0};
    }

    const std::size_t anchor_tiles = ceil_div(m, kTileN);
    const std::size_t tile_begin = static_cast<std::size_t>(blockIdx.y) * tiles_per_split;
    const std::size_t tile_end =
        tile_begin + tiles_per_split < anchor_tiles ? tile_begin + tiles_per_split : anchor_tiles;
    for (std::size_t tile = tile_begin; tile < tile_end; ++tile) {
        const std::size_t col0 = tile * kTileN;
        float acc[kOwn][kOwn];
#pragma unroll
        for (int i = 0; i < kOwn; ++i) {
#pragma unroll
            for (int j = 0; j < kOwn; ++j) {
                acc[i][j] = 0.0f;
            }
        }
        // The next stage is loaded into registers while the current one is multiplied.
        float x_next[kLoads];
        float c_next[kLoads];
        load_stage(points, n, d, row0, load_k, load_row, x_next);
        load_stage(anchors, m, d, col0, load_k, load_row, c_next);
        for (int k0 = 0; k0 < d; k0 += kTileK) {
            __syncthreads();  // the previous stage is read by everyone; x_norms is written
#pragma unroll
            for (int e = 0; e < kLoads; ++e) {
                xs[load_k][load_row + e * kRowsPerPass] = x_next[e];
                cs[load_k][load_row + e * kRowsPerPass] = c_next[e];
            }
            __syncthreads();
            if (k0 + kTileK < d) {
                load_stage(points, n, d, row0, k0 + kTileK + load_k, load_row, x_next);
                load_stage(anchors, m, d, col0, k0 + kTileK + load_k, load_row, c_next);
            }
#pragma unroll
            for (int kk = 0; kk < kTileK; ++kk) {
                const float4 a_lo = *reinterpret_cast<const float4*>(&xs[kk][ty * 4]);
                const float4 a_hi = *reinterpret_cast<const float4*>(&xs[kk][kTileM / 2 + ty * 4]);
                const float4 b_lo = *reinterpret_cast<const float4*>(&cs[kk][tx * 4]);
                const float4 b_hi = *reinterpret_cast<const float4*>(&cs[kk][kTileN / 2 + tx * 4]);
                const float a[kOwn] = {a_lo.x, a_lo.y, a_lo.z, a_lo.w, a_hi.x, a_hi.y, a_hi.z, a_hi.w};
                const float b[kOwn] = {b_lo.x, b_lo.y, b_lo.z, b_lo.w, b_hi.x, b_hi.y, b_hi.z, b_hi.w};
#pragma unroll
                for (int i = 0; i < kOwn; ++i) {
#pragma unroll
                    for (int j = 0; j < kOwn; ++j) {
                        acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
                    }
                }
            }
        }

        float c_norm[kOwn];
#pragma unroll
        for (int j = 0; j < kOwn; ++j) {
            const std::size_t col = col0 + owned(tx, j);
            c_norm[j] = col < m ? anchor_norms[col] : 0.0f;
        }
#pragma unroll
        for (int i = 0; i < kOwn; ++i) {
            const float x_norm = x_norms[owned(ty, i)];
            const std::size_t row = row0 + owned(ty, i);
#pragma unroll
            for (int j = 0; j < kOwn; ++j) {
                const std::size_t col = col0 + owned(tx, j);
                if (col < m && !(exclude_self && col == row)) {
                    // The CPU's expression; the rounding bound covers any evaluation order.
                    offer(x_norm + c_norm[j] - 2.0f * acc[i][j], static_cast<std::uint32_t>(col), top[i]);
                }
            }
        }
    }

    // The 16 threads that share a row group are the 16 lanes of one half warp.
#pragma unroll
    for (int i = 0; i < kOwn; ++i) {
        Candidate mine = top[i];
#pragma unroll
        for (int offset = kSide / 2; offset > 0; offset /= 2) {
            const Candidate other{__shfl_xor_sync(kFullMask, mine.best, offset),
                                  __shfl_xor_sync(kFullMask, mine.second, offset),
                                  __shfl_xor_sync(kFullMask, mine.third, offset),
                                  __shfl_xor_sync(kFullMask, mine.best_j, offset),
                                  __shfl_xor_sync(kFullMask, mine.second_j, offset)};
            merge(mine, other);
        }
        const std::size_t row = row0 + owned(ty, i);
        if (tx == 0 && row < n) {
            candidates[static_cast<std::size_t>(blockIdx.y) * n + row] = mine;
        }
    }
}

__device__ __forceinline__ Candidate merged(const Candidate* __restrict__ candidates, int splits, std::size_t n,
                                            std::size_t i) {
    Candidate c = candidates[i];
    for (int s = 1; s < splits; ++s) {
        merge(c, candidates[static_cast<std::size_t>(s) * n + i]);
    }
    return c;
}

// Combines the splits, then applies the CPU's bound: a point is certain when no other anchor's fast
// distance lies within the bound of the best. The others are re-scored in double: against the best
// two when the third lies outside the bound (listed from the front of `uncertain`), else against
// every anchor (listed from the back).
__global__ void resolve_kernel(const Candidate* __restrict__ candidates, int splits, std::size_t n,
                               const float* __restrict__ point_norms, const float* __restrict__ anchor_norms,
                               const unsigned* __restrict__ max_anchor_norm_bits, float factor,
                               std::uint32_t* __restrict__ chosen, std::uint32_t* __restrict__ uncertain,
                               unsigned* __restrict__ uncertain_counts) {
    const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= n) {
        return;
    }
    const Candidate c = merged(candidates, splits, n, i);
    const float max_anchor_norm = __uint_as_float(*max_anchor_norm_bits);
    const float threshold = c.best + factor * (2.0f * point_norms[i] + anchor_norms[c.best_j] + max_anchor_norm);
    chosen[i] = c.best_j;
    if (c.second <= threshold) {
        if (c.third > threshold) {
            uncertain[atomicAdd(&uncertain_counts[0], 1u)] = static_cast<std::uint32_t>(i);
        } else {
            uncertain[n - 1 - atomicAdd(&uncertain_counts[1], 1u)] = static_cast<std::uint32_t>(i);
        }
    }
}

// One warp per pair point scores its best two anchors in double; on a tie the lower anchor wins, as
// on the CPU. The list's order depends on scheduling, but each point's result does not.
__global__ void __launch_bounds__(kThreads)
    rescore_pairs_kernel(const float* __restrict__ points, const float* __restrict__ anchors, int d,
                         const Candidate* __restrict__ candidates, int splits, std::size_t n,
                         const std::uint32_t* __restrict__ uncertain, const unsigned* __restrict__ uncertain_counts,
                         std::uint32_t* __restrict__ chosen) {
    const int lane = threadIdx.x % kWarp;
    const unsigned warps = gridDim.x * (blockDim.x / kWarp);
    const unsigned count = uncertain_counts[0];
    for (unsigned u = (blockIdx.x * blockDim.x + threadIdx.x) / kWarp; u < count; u += warps) {
        const std::uint32_t i = uncertain[u];
        const Candidate c = merged(candidates, splits, n, i);
        const std::uint32_t low = min(c.best_j, c.second_j);
        const std::uint32_t high = max(c.best_j, c.second_j);
        const float* const rows[2] = {anchors + static_cast<std::size_t>(low) * d,
                                      anchors + static_cast<std::size_t>(high) * d};
        double dist[2];
        warp_squared_distances<2>(points + static_cast<std::size_t>(i) * d, rows, d, lane, dist);
        if (lane == 0) {
            chosen[i] = dist[1] < dist[0] ? high : low;
        }
    }
}

// One block per point with three or more anchors within the bound: its warps share the anchors,
// a few at a time so that their loads overlap, in double; then the block takes the smallest
// (distance, anchor).
constexpr int kAnchorsAtOnce = 4;

__global__ void __launch_bounds__(kThreads)
    rescore_all_kernel(const float* __restrict__ points, const float* __restrict__ anchors, std::uint32_t m, int d,
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
        const float* x = points + static_cast<std::size_t>(i) * d;
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

// Worst-case error of the fast distance relative to ||x||^2 + ||c||^2, exactly as src/cpu/exact_assign.cpp.
float rounding_factor(int d) {
    return static_cast<float>(d + 8) * FLT_EPSILON * 0.5f;
}

}  // namespace

AssignPlan plan_assign(std::size_t n, std::size_t m, int multiprocessors) {
    const std::size_t point_tiles = ceil_div(n, kTileM);
    const std::size_t anchor_tiles = ceil_div(m, kTileN);
    const std::size_t wanted_blocks = 2 * static_cast<std::size_t>(std::max(multiprocessors, 1));
    std::size_t splits = std::clamp<std::size_t>(ceil_div(wanted_blocks, point_tiles), 1,
                                                 std::max<std::size_t>(anchor_tiles, 1));
    const std::size_t tiles_per_split = ceil_div(anchor_tiles, splits);
    splits = ceil_div(anchor_tiles, tiles_per_split);
    return {static_cast<int>(splits), static_cast<int>(tiles_per_split)};
}

void launch_exact_assign(const AssignArgs& args, cudaStream_t stream) {
    if (args.n == 0 || args.m == 0) {
        return;
    }
    const dim3 tiles(static_cast<unsigned>(ceil_div(args.n, kTileM)), static_cast<unsigned>(args.plan.splits));
    fast_assign_kernel<<<tiles, kThreads, 0, stream>>>(args.points, args.point_norms, args.anchors, args.anchor_norms,
                                                       args.n, args.m, args.d, args.exclude_self,
                                                       args.plan.tiles_per_split, args.candidates);
    check_launch("fast_assign_kernel", stream);

    constexpr int kResolveThreads = 256;
    resolve_kernel<<<static_cast<unsigned>(ceil_div(args.n, kResolveThreads)), kResolveThreads, 0, stream>>>(
        args.candidates, args.plan.splits, args.n, args.point_norms, args.anchor_norms, args.max_anchor_norm_bits,
        rounding_factor(args.d), args.chosen, args.uncertain, args.uncertain_counts);
    check_launch("resolve_kernel", stream);

    // Enough warps to fill the GPU; the counts of uncertain points stay on the device.
    const unsigned rescore_blocks = static_cast<unsigned>(std::max(args.multiprocessors, 1)) * 8;
    rescore_pairs_kernel<<<rescore_blocks, kThreads, 0, stream>>>(args.points, args.anchors, args.d, args.candidates,
                                                                  args.plan.splits, args.n, args.uncertain,
                                                                  args.uncertain_counts, args.chosen);
    check_launch("rescore_pairs_kernel", stream);
    rescore_all_kernel<<<rescore_blocks, kThreads, 0, stream>>>(args.points, args.anchors,
                                                                static_cast<std::uint32_t>(args.m), args.d,
                                                                args.exclude_self, args.n, args.uncertain,
                                                                args.uncertain_counts, args.chosen);
    check_launch("rescore_all_kernel", stream);
}

}  // namespace vlattice::cuda
