// The tensor-core fast assign: mma.sync m16n8k8 with tf32 operands and float32 accumulators. Tiles
// of points and anchors stream into shared memory through a three-stage cp.async pipeline, so that
// global loads run two stages ahead of the tensor cores without holding registers; ldmatrix reads
// each mma fragment in one instruction, and the operands are rounded to tf32 in registers.
// The split variant (3xtf32) writes each operand as a tf32 head plus a tf32 tail and adds the three
// products that matter, head x head + head x tail + tail x head: three times the tensor work for a
// product error of ~2^-20 instead of 2^-10, which keeps the exact repair's window narrow.
#include "fast_assign.cuh"

#include "cuda_check.hpp"

#include <cfloat>
#include <cmath>

namespace vlattice::cuda {

namespace {

constexpr int kTile = kFastTile;  // points per block, and anchors per tile
constexpr int kChunk = 32;        // coordinates per stage: four mma k-steps
constexpr int kStages = 3;
constexpr int kStride = kChunk + 4;  // floats per staged row: ldmatrix's 8 rows fall on 32 different banks
constexpr int kThreads = 256;        // 8 warps: 4 along the points, 2 along the anchors
constexpr int kWarpRows = 32;
constexpr int kWarpCols = 64;
constexpr int kMmaM = 16;
constexpr int kMmaN = 8;
constexpr int kMmaK = 8;
constexpr int kRowTiles = kWarpRows / kMmaM;  // per warp
constexpr int kColTiles = kWarpCols / kMmaN;  // per warp
constexpr int kOwnedRows = 2 * kRowTiles;     // each lane holds two rows of every mma tile
constexpr int kStageFloats = kTile * kStride;
constexpr std::size_t kSharedBytes = std::size_t{2} * kStages * kStageFloats * sizeof(float);
static_assert(kTile == 4 * kWarpRows && kTile == 2 * kWarpCols && kThreads == 8 * kWarp, "8 warps, 4 x 2");
static_assert(kColTiles % 2 == 0 && kChunk % kMmaK == 0, "column tiles in pairs, whole k-steps");
static_assert(kTile * sizeof(Candidate) <= kSharedBytes, "the row exchange fits in the staging buffers");

__device__ __forceinline__ unsigned shared_address(const void* pointer) {
    return static_cast<unsigned>(__cvta_generic_to_shared(pointer));
}

// Copies `bytes` (4 or 16) from global to shared memory asynchronously; with `valid` false it writes
// zeros instead, which add nothing to the dot products.
template <int kBytes>
__device__ __forceinline__ void copy_async(float* to, const float* from, bool valid) {
    const unsigned source_bytes = valid ? kBytes : 0;
    if constexpr (kBytes == 16) {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(shared_address(to)), "l"(from),
                     "r"(source_bytes));
    } else {
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(shared_address(to)), "l"(from),
                     "r"(source_bytes));
    }
}

__device__ __forceinline__ void commit_copies() { asm volatile("cp.async.commit_group;"); }

template <int kPending>
__device__ __forceinline__ void wait_copies() {
    asm volatile("cp.async.wait_group %0;" ::"n"(kPending));
}

// Stages coordinates [k0, k0 + kChunk) of rows [row0, row0 + kTile): 16-byte copies when every row
// starts 16-byte aligned (d % 4 == 0), else 4-byte ones. Rows past `count`, coordinates past d are zero.
template <int kBytes>
__device__ __forceinline__ void stage_rows(float* to, const float* __restrict__ rows, std::size_t count, int d,
                                           std::size_t row0, int k0, int tid) {
    constexpr int kPerRow = kChunk * 4 / kBytes;
    constexpr int kCopies = kTile * kPerRow / kThreads;
#pragma unroll
    for (int e = 0; e < kCopies; ++e) {
        const int item = tid + e * kThreads;
        const int r = item / kPerRow;
        const int k = (item % kPerRow) * (kBytes / 4);
        const std::size_t row = row0 + r;
        const bool valid = row < count && k0 + k < d;
        copy_async<kBytes>(to + r * kStride + k, valid ? rows + row * d + k0 + k : rows, valid);
    }
}

__device__ __forceinline__ float to_tf32(float value) {
    std::uint32_t rounded;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(rounded) : "f"(value));
    return __uint_as_float(rounded);
}

// One mma operand fragment: the values rounded to tf32 (round to nearest, ties away: the operand
// error the bound assumes), and with kSplit also what rounding left, rounded again.
template <bool kSplit>
struct Fragment {
    float head[4];
    float tail[kSplit ? 4 : 1];
};

template <bool kSplit>
__device__ __forceinline__ void load_matrices(unsigned address, Fragment<kSplit>& out) {
    std::uint32_t r0, r1, r2, r3;
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(address));
    const std::uint32_t raw[4] = {r0, r1, r2, r3};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
        const float value = __uint_as_float(raw[e]);
        out.head[e] = to_tf32(value);
        if constexpr (kSplit) {
            out.tail[e] = to_tf32(__fsub_rn(value, out.head[e]));
        }
    }
}

__device__ __forceinline__ void mma(float (&acc)[4], const float* a, float b0, float b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
        : "r"(__float_as_uint(a[0])), "r"(__float_as_uint(a[1])), "r"(__float_as_uint(a[2])),
          "r"(__float_as_uint(a[3])), "r"(__float_as_uint(b0)), "r"(__float_as_uint(b1)));
}

// acc += a . b over one k-step; with kSplit the small products go first.
template <bool kSplit>
__device__ __forceinline__ void mma_step(float (&acc)[4], const Fragment<kSplit>& a, const Fragment<kSplit>& b, int pair) {
    if constexpr (kSplit) {
        mma(acc, a.tail, b.head[2 * pair], b.head[2 * pair + 1]);
        mma(acc, a.head, b.tail[2 * pair], b.tail[2 * pair + 1]);
    }
    mma(acc, a.head, b.head[2 * pair], b.head[2 * pair + 1]);
}

// Two blocks per SM hide latency for the plain kernel; the split one's doubled fragments would spill
// at the 128 registers that allows, so it runs one.
template <int kBytes, bool kSplit>
__global__ void __launch_bounds__(kThreads, kBytes == 16 && !kSplit ? 2 : 1)
    fast_assign_kernel(const float* __restrict__ points, const float* __restrict__ point_norms,
                       const float* __restrict__ anchors, const float* __restrict__ anchor_norms, std::size_t n,
                       std::size_t m, int d, bool exclude_self, int tiles_per_split,
                       Candidate* __restrict__ candidates) {
    extern __shared__ __align__(16) float staged[];  // kStages point stages, then kStages anchor stages
    __shared__ float x_norms[kTile];
    float* const xs = staged;
    float* const cs = staged + kStages * kStageFloats;

    const int tid = threadIdx.x;
    const int lane = tid % kWarp;
    const int warp = tid / kWarp;
    const int warp_row = (warp / 2) * kWarpRows;
    const int warp_col = (warp % 2) * kWarpCols;
    const int group = lane / 4;  // row of the accumulator fragments
    const int quad = lane % 4;   // column pair of the accumulator fragments
    const std::size_t row0 = static_cast<std::size_t>(blockIdx.x) * kTile;

    for (int r = tid; r < kTile; r += kThreads) {
        x_norms[r] = row0 + r < n ? point_norms[row0 + r] : 0.0f;
    }

    // ldmatrix: lane l addresses row l % 8 of matrix l / 8. For A the matrices are (rows 0-7, k 0-3),
    // (rows 8-15, k 0-3), (rows 0-7, k 4-7), (rows 8-15, k 4-7) of a row tile: a0..a3. For B they are
    // (anchors 0-7, k 0-3), (0-7, k 4-7), (8-15, k 0-3), (8-15, k 4-7) of a column-tile pair.
    const int matrix = lane / 8;
    const int a_offset = (warp_row + lane % 8 + (matrix % 2) * 8) * kStride + (matrix / 2) * 4;
    const int b_offset = (warp_col + lane % 8 + (matrix / 2) * 8) * kStride + (matrix % 2) * 4;

    // Owned row o is row (o / 2) * 16 + (o % 2) * 8 + group of the warp's rows.
    Candidate top[kOwnedRows];
#pragma unroll
    for (int o = 0; o < kOwnedRows; ++o) {
        top[o] = empty_candidate();
    }

    const int chunks = static_cast<int>(ceil_div(static_cast<std::size_t>(d), kChunk));
    const TileRange tiles = split_tiles(m, tiles_per_split);
    for (std::size_t tile = tiles.begin; tile < tiles.end; ++tile) {
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
        // Every thread commits one group per stage, empty past the end, so that waiting for all but
        // the last kStages - 2 groups always means "the current stage has landed".
        __syncthreads();  // the previous tile's stages are read by everyone; x_norms is written
#pragma unroll
        for (int s = 0; s < kStages - 1; ++s) {
            if (s < chunks) {
                stage_rows<kBytes>(xs + s * kStageFloats, points, n, d, row0, s * kChunk, tid);
                stage_rows<kBytes>(cs + s * kStageFloats, anchors, m, d, col0, s * kChunk, tid);
            }
            commit_copies();
        }
        for (int c = 0; c < chunks; ++c) {
            wait_copies<kStages - 2>();
            __syncthreads();  // stage c is in for everyone, and stage c - 1 is no longer read
            const int ahead = c + kStages - 1;
            if (ahead < chunks) {
                const int slot = ahead % kStages;
                stage_rows<kBytes>(xs + slot * kStageFloats, points, n, d, row0, ahead * kChunk, tid);
                stage_rows<kBytes>(cs + slot * kStageFloats, anchors, m, d, col0, ahead * kChunk, tid);
            }
            commit_copies();
            const unsigned a_base = shared_address(xs + (c % kStages) * kStageFloats + a_offset);
            const unsigned b_base = shared_address(cs + (c % kStages) * kStageFloats + b_offset);
#pragma unroll
            for (int kk = 0; kk < kChunk; kk += kMmaK) {
                Fragment<kSplit> a[kRowTiles];
#pragma unroll
                for (int i = 0; i < kRowTiles; ++i) {
                    load_matrices(a_base + (i * kMmaM * kStride + kk) * sizeof(float), a[i]);
                }
#pragma unroll
                for (int p = 0; p < kColTiles / 2; ++p) {
                    Fragment<kSplit> b;
                    load_matrices(b_base + (p * 2 * kMmaN * kStride + kk) * sizeof(float), b);
#pragma unroll
                    for (int i = 0; i < kRowTiles; ++i) {
                        mma_step(acc[i][2 * p], a[i], b, 0);
                        mma_step(acc[i][2 * p + 1], a[i], b, 1);
                    }
                }
            }
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
                    for (int o = 0; o < kOwnedRows; ++o) {
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
    wait_copies<0>();  // only empty groups are left; nothing may be in flight when the block exits

    // The four lanes of a group hold the same rows; then the two warps of a row band meet in shared
    // memory, in the staging buffers once everyone is done with them.
#pragma unroll
    for (int o = 0; o < kOwnedRows; ++o) {
        merge_lanes(top[o], 2);
    }
    __syncthreads();
    Candidate* const exchange = reinterpret_cast<Candidate*>(staged);
    if (warp_col != 0 && quad == 0) {
#pragma unroll
        for (int o = 0; o < kOwnedRows; ++o) {
            exchange[warp_row + (o / 2) * kMmaM + (o % 2) * 8 + group] = top[o];
        }
    }
    __syncthreads();
    if (warp_col == 0 && quad == 0) {
#pragma unroll
        for (int o = 0; o < kOwnedRows; ++o) {
            const int r = warp_row + (o / 2) * kMmaM + (o % 2) * 8 + group;
            merge(top[o], exchange[r]);
            if (row0 + r < n) {
                candidates[static_cast<std::size_t>(blockIdx.y) * n + row0 + r] = top[o];
            }
        }
    }
}

template <int kBytes, bool kSplit>
void launch(const FastAssignArgs& a, cudaStream_t stream) {
    // More than the default 48 KiB of dynamic shared memory needs the kernel's consent on the current device.
    CUDA_CHECK(cudaFuncSetAttribute(fast_assign_kernel<kBytes, kSplit>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(kSharedBytes)));
    const dim3 tiles(static_cast<unsigned>(ceil_div(a.n, kTile)), static_cast<unsigned>(a.splits));
    fast_assign_kernel<kBytes, kSplit><<<tiles, kThreads, kSharedBytes, stream>>>(
        a.points, a.point_norms, a.anchors, a.anchor_norms, a.n, a.m, a.d, a.exclude_self, a.tiles_per_split,
        a.candidates);
    check_launch(kSplit ? "fast_assign_tf32x3_kernel" : "fast_assign_tf32_kernel", stream);
}

template <bool kSplit>
void launch_aligned(const FastAssignArgs& a, cudaStream_t stream) {
    if (a.d % 4 == 0) {
        launch<16, kSplit>(a, stream);
    } else {
        launch<4, kSplit>(a, stream);
    }
}

}  // namespace

void launch_fast_assign_tf32(const FastAssignArgs& a, cudaStream_t stream) {
    launch_aligned<false>(a, stream);
}

void launch_fast_assign_tf32x3(const FastAssignArgs& a, cudaStream_t stream) {
    launch_aligned<true>(a, stream);
}

// Each operand is rounded to tf32 (relative error 2^-11), so a product is off by at most
// 2^-10 + 2^-22 of its size. The tensor cores' float32 accumulation is not specified to round to
// nearest; it is taken as truncating, two units in the last place per addition over d terms. The
// norms and the epilogue's two additions add a few units more, as in fp32_rounding_factor.
float tf32_rounding_factor(int d) {
    return std::ldexp(1.0f, -10) + std::ldexp(1.0f, -22) + static_cast<float>(2 * d + 8) * FLT_EPSILON * 0.5f;
}

// With a = head + tail + e (|a - head| <= 2^-11 |a|, |e| <= 2^-11 |a - head| <= 2^-22 |a|), the three
// products leave out tail x tail and the terms with e: at most 3 * 2^-22 (1 + 2^-10) + 2^-33 of |a||b|,
// under 2^-20 in all. The accumulation adds 3 d terms, taken as truncating as above.
float tf32x3_rounding_factor(int d) {
    return std::ldexp(1.0f, -20) + static_cast<float>(6 * d + 8) * FLT_EPSILON * 0.5f;
}

}  // namespace vlattice::cuda
