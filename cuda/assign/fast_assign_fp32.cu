#include "assign/fast_assign.cuh"

#include "runtime/cuda_check.hpp"

#include <math_constants.h>


namespace vlattice::cuda {

namespace {

// A register-tiled SGEMM whose epilogue offers each distance to its point's Candidate instead of
// writing the n x m matrix of distances.
constexpr int kTileM = kFastTile;  // points per block
constexpr int kTileN = kFastTile;  // anchors per tile
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

// Rows past the end and coordinates past d load as zero, which adds nothing to the dot products.
// `at(row, k)` reads a value.
template <class At>
__device__ __forceinline__ void load_stage(const At& at, std::size_t count, int d, std::size_t row0, int k,
                                           int load_row, float (&out)[kLoads]) {
#pragma unroll
    for (int e = 0; e < kLoads; ++e) {
        const std::size_t row = row0 + load_row + e * kRowsPerPass;
        out[e] = (row < count && k < d) ? at(row, k) : 0.0f;
    }
}

// The points in their stored type (a 16-bit value times its power of two is exact in float32).
template <RowType kType>
__global__ void __launch_bounds__(kThreads)
    fast_assign_kernel(PointRows points, const float* __restrict__ anchors, const float* __restrict__ anchor_norms,
                       std::size_t n, std::size_t m, int d, bool exclude_self, int tiles_per_split,
                       Candidate* __restrict__ candidates) {
    const auto point_at = [&](std::size_t row, int k) { return points.at<kType>(row, k); };
    const auto anchor_at = [&](std::size_t row, int k) { return anchors[row * d + k]; };
    __shared__ __align__(16) float xs[kTileK][kTileM + kPad];
    __shared__ __align__(16) float cs[kTileK][kTileN + kPad];

    const int tid = threadIdx.x;
    const int tx = tid % kSide;  // column group: anchors
    const int ty = tid / kSide;  // row group: points
    const int load_k = tid % kTileK;
    const int load_row = tid / kTileK;
    const std::size_t row0 = static_cast<std::size_t>(blockIdx.x) * kTileM;

    Candidate top[kOwn];
#pragma unroll
    for (int i = 0; i < kOwn; ++i) {
        top[i] = empty_candidate();
    }

    const TileRange tiles = split_tiles(m, tiles_per_split, blockIdx.y);
    for (std::size_t tile = tiles.begin; tile < tiles.end; ++tile) {
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
        load_stage(point_at, n, d, row0, load_k, load_row, x_next);
        load_stage(anchor_at, m, d, col0, load_k, load_row, c_next);
        for (int k0 = 0; k0 < d; k0 += kTileK) {
            __syncthreads();  // the previous stage is read by everyone
#pragma unroll
            for (int e = 0; e < kLoads; ++e) {
                xs[load_k][load_row + e * kRowsPerPass] = x_next[e];
                cs[load_k][load_row + e * kRowsPerPass] = c_next[e];
            }
            __syncthreads();
            if (k0 + kTileK < d) {
                load_stage(point_at, n, d, row0, k0 + kTileK + load_k, load_row, x_next);
                load_stage(anchor_at, m, d, col0, k0 + kTileK + load_k, load_row, c_next);
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

        // Past the last anchor, and for the point's own row when excluded, the value is +inf, which no
        // list takes.
        float c_norm[kOwn];
#pragma unroll
        for (int j = 0; j < kOwn; ++j) {
            const std::size_t col = col0 + owned(tx, j);
            c_norm[j] = col < m ? anchor_norms[col] : CUDART_INF_F;
        }
#pragma unroll
        for (int i = 0; i < kOwn; ++i) {
            const std::size_t row = row0 + owned(ty, i);
#pragma unroll
            for (int j = 0; j < kOwn; ++j) {
                const bool self = exclude_self && col0 + owned(tx, j) == row;
                acc[i][j] = self ? CUDART_INF_F : fmaf(-2.0f, acc[i][j], c_norm[j]);
            }
            offer_below<kOwn>(CUDART_INF_F, [&](int j) { return acc[i][j]; },
                              [&](int j) { return static_cast<std::uint32_t>(col0 + owned(tx, j)); }, top[i]);
        }
    }

    // The 16 threads that share a row group are the 16 lanes of one half warp.
#pragma unroll
    for (int i = 0; i < kOwn; ++i) {
        merge_lanes(top[i], kSide / 2);
        const std::size_t row = row0 + owned(ty, i);
        if (tx == 0 && row < n) {
            candidates[static_cast<std::size_t>(blockIdx.y) * n + row] = top[i];
        }
    }
}

}  // namespace

void launch_fast_assign_fp32(const FastAssignArgs& a, cudaStream_t stream) {
    const dim3 tiles(static_cast<unsigned>(ceil_div(a.n, kTileM)), static_cast<unsigned>(a.splits));
    with_row_type(a.points.type, [&](auto type) {
        fast_assign_kernel<decltype(type)::value><<<tiles, kThreads, 0, stream>>>(
            a.points, a.anchors, a.anchor_norms, a.n, a.m, a.d, a.exclude_self, a.tiles_per_split, a.candidates);
    });
    check_launch("fast_assign_fp32_kernel", stream);
}

}  // namespace vlattice::cuda
