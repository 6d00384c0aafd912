// The tensor-core fast assign: mma.sync m16n8k8 with tf32 operands and float32 accumulators. The
// operands are rounded to tf32 once, as they are staged into shared memory, in the order in which
// the mma fragments read them, so that every fragment is one 16-byte load.
#include "fast_assign.cuh"

#include "cuda_check.hpp"

#include <cfloat>
#include <cmath>

namespace vlattice::cuda {

namespace {

constexpr int kTile = kFastTile;  // points per block, and anchors per tile
constexpr int kChunk = 16;        // coordinates per shared-memory stage: two mma k-steps
constexpr int kThreads = 256;     // 8 warps: 4 along the points, 2 along the anchors
constexpr int kWarpRows = 32;
constexpr int kWarpCols = 64;
constexpr int kMmaM = 16;
constexpr int kMmaN = 8;
constexpr int kMmaK = 8;
constexpr int kSteps = kChunk / kMmaK;
constexpr int kRowTiles = kWarpRows / kMmaM;  // per warp
constexpr int kColTiles = kWarpCols / kMmaN;  // per warp
constexpr int kStageFloats = kTile * kChunk;
constexpr int kRowsPerPass = kThreads / kChunk;
constexpr int kLoads = kTile / kRowsPerPass;  // elements per thread per stage, per operand
static_assert(kTile == 4 * kWarpRows && kTile == 2 * kWarpCols && kThreads == 8 * kWarp, "8 warps, 4 x 2");
static_assert(kChunk % kMmaK == 0 && kColTiles % 2 == 0, "whole k-steps, column tiles in pairs");

// Where element (r, k) of a staged point tile goes: A fragment of row tile r / 16 and k-step k / 8,
// lane (r % 8) * 4 + k % 4, register (r % 16) / 8 + 2 * ((k % 8) / 4), as mma.m16n8k8 reads it.
__device__ __forceinline__ int a_slot(int r, int k) {
    const int lane = (r % 8) * 4 + k % 4;
    const int reg = (r % 16) / 8 + 2 * ((k % 8) / 4);
    return (((r / 16) * kSteps + k / kMmaK) * kWarp + lane) * 4 + reg;
}

// Element (c, k) of a staged anchor tile: B fragments of column tiles 2p and 2p + 1 (p = c / 16)
// share one 16-byte slot per lane, registers (c / 8) % 2 * 2 + (k % 8) / 4.
__device__ __forceinline__ int b_slot(int c, int k) {
    const int lane = (c % 8) * 4 + k % 4;
    const int reg = (c / 8) % 2 * 2 + (k % 8) / 4;
    return (((c / 16) * kSteps + k / kMmaK) * kWarp + lane) * 4 + reg;
}

// Round to nearest (ties away) onto tf32's 10-bit significand: the operand error the bound assumes.
__device__ __forceinline__ float to_tf32(float value) {
    std::uint32_t bits;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(bits) : "f"(value));
    return __uint_as_float(bits);
}

__device__ __forceinline__ void mma(float (&acc)[4], const float4& a, float b0, float b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
        : "r"(__float_as_uint(a.x)), "r"(__float_as_uint(a.y)), "r"(__float_as_uint(a.z)), "r"(__float_as_uint(a.w)),
          "r"(__float_as_uint(b0)), "r"(__float_as_uint(b1)));
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

__global__ void __launch_bounds__(kThreads, 1)
    fast_assign_kernel(const float* __restrict__ points, const float* __restrict__ point_norms,
                       const float* __restrict__ anchors, const float* __restrict__ anchor_norms, std::size_t n,
                       std::size_t m, int d, bool exclude_self, int tiles_per_split,
                       Candidate* __restrict__ candidates) {
    // Two stages, so that one barrier per stage separates the writes of one from the reads of the other.
    __shared__ __align__(16) float xs[2][kStageFloats];
    __shared__ __align__(16) float cs[2][kStageFloats];
    __shared__ float x_norms[kTile];
    __shared__ Candidate exchange[kTile];

    const int tid = threadIdx.x;
    const int lane = tid % kWarp;
    const int warp = tid / kWarp;
    const int warp_row = (warp / 2) * kWarpRows;
    const int warp_col = (warp % 2) * kWarpCols;
    const int group = lane / 4;  // row of the accumulator fragments
    const int quad = lane % 4;   // column pair of the accumulator fragments
    const int load_k = tid % kChunk;
    const int load_row = tid / kChunk;
    const std::size_t row0 = static_cast<std::size_t>(blockIdx.x) * kTile;

    for (int r = tid; r < kTile; r += kThreads) {
        x_norms[r] = row0 + r < n ? point_norms[row0 + r] : 0.0f;
    }

    // Owned row o is row (o / 2) * 16 + (o % 2) * 8 + group of the warp's rows.
    Candidate top[2 * kRowTiles];
#pragma unroll
    for (int o = 0; o < 2 * kRowTiles; ++o) {
        top[o] = empty_candidate();
    }

    const std::size_t anchor_tiles = ceil_div(m, kTile);
    const std::size_t tile_begin = static_cast<std::size_t>(blockIdx.y) * tiles_per_split;
    const std::size_t tile_end =
        tile_begin + tiles_per_split < anchor_tiles ? tile_begin + tiles_per_split : anchor_tiles;
    for (std::size_t tile = tile_begin; tile < tile_end; ++tile) {
        const std::size_t col0 = tile * kTile;
        float acc[kRowTiles][kColTiles][4];
#pragma unroll
        for (int i = 0; i < kRowTiles; ++i) {
#pragma unroll
            for (int j = 0; j < kColTiles; ++j) {
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    acc[i][j][e] = 0.0f;
                }
            }
        }
        float x_next[kLoads];
        float c_next[kLoads];
        load_stage(points, n, d, row0, load_k, load_row, x_next);
        load_stage(anchors, m, d, col0, load_k, load_row, c_next);
        __syncthreads();  // the previous tile's last stage is read by everyone; x_norms is written
        int stage = 0;
#pragma unroll
        for (int e = 0; e < kLoads; ++e) {
            xs[0][a_slot(load_row + e * kRowsPerPass, load_k)] = to_tf32(x_next[e]);
            cs[0][b_slot(load_row + e * kRowsPerPass, load_k)] = to_tf32(c_next[e]);
        }
        __syncthreads();
        for (int k0 = 0; k0 < d; k0 += kChunk) {
            const bool more = k0 + kChunk < d;
            // The next stage travels from global memory while this one is multiplied.
            if (more) {
                load_stage(points, n, d, row0, k0 + kChunk + load_k, load_row, x_next);
                load_stage(anchors, m, d, col0, k0 + kChunk + load_k, load_row, c_next);
            }
            const float4* a_frags = reinterpret_cast<const float4*>(xs[stage]);
            const float4* b_frags = reinterpret_cast<const float4*>(cs[stage]);
#pragma unroll
            for (int s = 0; s < kSteps; ++s) {
                float4 a[kRowTiles];
#pragma unroll
                for (int i = 0; i < kRowTiles; ++i) {
                    a[i] = a_frags[((warp_row / kMmaM + i) * kSteps + s) * kWarp + lane];
                }
#pragma unroll
                for (int p = 0; p < kColTiles / 2; ++p) {
                    const float4 b = b_frags[((warp_col / (2 * kMmaN) + p) * kSteps + s) * kWarp + lane];
#pragma unroll
                    for (int i = 0; i < kRowTiles; ++i) {
                        mma(acc[i][2 * p], a[i], b.x, b.y);
                        mma(acc[i][2 * p + 1], a[i], b.z, b.w);
                    }
                }
            }
            if (more) {
#pragma unroll
                for (int e = 0; e < kLoads; ++e) {
                    xs[stage ^ 1][a_slot(load_row + e * kRowsPerPass, load_k)] = to_tf32(x_next[e]);
                    cs[stage ^ 1][b_slot(load_row + e * kRowsPerPass, load_k)] = to_tf32(c_next[e]);
                }
            }
            __syncthreads();
            stage ^= 1;
        }

        // Accumulator e of tile (i, j) is row i * 16 + (e / 2) * 8 + group, column j * 8 + quad * 2 + e % 2.
#pragma unroll
        for (int j = 0; j < kColTiles; ++j) {
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                const std::size_t col = col0 + warp_col + j * kMmaN + quad * 2 + half;
                if (col < m) {
                    const float c_norm = anchor_norms[col];
#pragma unroll
                    for (int o = 0; o < 2 * kRowTiles; ++o) {
                        const int r = warp_row + (o / 2) * kMmaM + (o % 2) * 8 + group;
                        if (!(exclude_self && col == row0 + r)) {
                            // The CPU's expression; the rounding bound covers any evaluation order.
                            const float dot = acc[o / 2][j][(o % 2) * 2 + half];
                            offer(x_norms[r] + c_norm - 2.0f * dot, static_cast<std::uint32_t>(col), top[o]);
                        }
                    }
                }
            }
        }
    }

    // The four lanes of a group hold the same rows; then the two warps of a row band meet in shared memory.
#pragma unroll
    for (int o = 0; o < 2 * kRowTiles; ++o) {
        merge_lanes(top[o], 2);
    }
    if (warp_col != 0 && quad == 0) {
#pragma unroll
        for (int o = 0; o < 2 * kRowTiles; ++o) {
            exchange[warp_row + (o / 2) * kMmaM + (o % 2) * 8 + group] = top[o];
        }
    }
    __syncthreads();
    if (warp_col == 0 && quad == 0) {
#pragma unroll
        for (int o = 0; o < 2 * kRowTiles; ++o) {
            const int r = warp_row + (o / 2) * kMmaM + (o % 2) * 8 + group;
            merge(top[o], exchange[r]);
            if (row0 + r < n) {
                candidates[static_cast<std::size_t>(blockIdx.y) * n + row0 + r] = top[o];
            }
        }
    }
}

}  // namespace

void launch_fast_assign_tf32(const FastAssignArgs& a, cudaStream_t stream) {
    const dim3 tiles(static_cast<unsigned>(ceil_div(a.n, kTile)), static_cast<unsigned>(a.splits));
    fast_assign_kernel<<<tiles, kThreads, 0, stream>>>(a.points, a.point_norms, a.anchors, a.anchor_norms, a.n, a.m,
                                                       a.d, a.exclude_self, a.tiles_per_split, a.candidates);
    check_launch("fast_assign_tf32_kernel", stream);
}

// Each operand is rounded to tf32 (relative error 2^-11), so a product is off by at most
// 2^-10 + 2^-22 of its size. The tensor cores' float32 accumulation is not specified to round to
// nearest; it is taken as truncating, two units in the last place per addition over d terms. The
// norms and the epilogue's two additions add a few units more, as in fp32_rounding_factor.
float tf32_rounding_factor(int d) {
    return std::ldexp(1.0f, -10) + std::ldexp(1.0f, -22) + static_cast<float>(2 * d + 8) * FLT_EPSILON * 0.5f;
}

}  // namespace vlattice::cuda
