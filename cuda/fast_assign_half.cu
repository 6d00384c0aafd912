// The tensor-core fast assign: mma.sync m16n8k16 with 16-bit operands (float16 or bfloat16) and
// float32 accumulators, reading operands that half_operands.cu wrote once: the points at upload, the
// anchors once per assign. Tiles of points and anchors stream into shared memory through a
// four-stage cp.async pipeline, ldmatrix reads each fragment in one instruction, and nothing is
// converted in the loop.
//
// kProducts picks how much of float32's precision the products keep:
//   1  head x head: the operands rounded to the 16-bit type (float16: the same 2^-11 as tf32);
//   2  x x (head + tail) of the anchors, for points that are exact in the type (a float16 input, or
//      integers such as pixels): a product error of 2^-22;
//   3  head x head + head x tail + tail x head: 2^-20 for any float32 points.
// With more than one product, each k-step's products go into a fresh accumulator that is then
// added to the running sum in float32, rounded to nearest: the tensor cores' own accumulation
// (taken as truncating) then only ever spans one k-step, which keeps the exact repair's window a
// few times narrower than float32 FMAs at d = 768.
#include "fast_assign.cuh"

#include "cuda_check.hpp"

#include <math_constants.h>

#include <cmath>

namespace vlattice::cuda {

namespace {

constexpr int kTile = kFastTile;  // points per block, and anchors per tile
constexpr int kChunk = 32;        // 16-bit values per staged row: two mma k-steps
constexpr int kStages = 4;
constexpr int kStride = kChunk + 8;  // values per staged row (80 bytes): ldmatrix's 8 rows hit 8 different bank groups
constexpr int kThreads = 256;        // 8 warps: 4 along the points, 2 along the anchors
constexpr int kWarpRows = 32;
constexpr int kWarpCols = 64;
constexpr int kMmaM = 16;
constexpr int kMmaN = 8;
constexpr int kMmaK = 16;
constexpr int kRowTiles = kWarpRows / kMmaM;  // per warp
constexpr int kColTiles = kWarpCols / kMmaN;  // per warp
constexpr int kOwnedRows = 2 * kRowTiles;     // each lane holds two rows of every mma tile
constexpr int kStageValues = kTile * kStride;
constexpr int kPiece = 8;  // 16-bit values per 16-byte copy
static_assert(kTile == 4 * kWarpRows && kTile == 2 * kWarpCols && kThreads == 8 * kWarp, "8 warps, 4 x 2");
static_assert(kColTiles % 2 == 0 && kChunk % kMmaK == 0, "column tiles in pairs, whole k-steps");

// Staged arrays, in this order: point heads, anchor heads, anchor tails (2 and 3 products), point
// tails (3 products).
constexpr int staged_arrays(int products) { return products + 1; }
constexpr std::size_t shared_bytes(int products) {
    return std::size_t{2} * kStages * staged_arrays(products) * kStageValues;
}
static_assert(kTile * sizeof(Candidate) <= shared_bytes(1), "the row exchange fits in the staging buffers");

__device__ __forceinline__ unsigned shared_address(const void* pointer) {
    return static_cast<unsigned>(__cvta_generic_to_shared(pointer));
}

// 16 bytes from global to shared memory, asynchronously; with `valid` false, zeros instead, which add
// nothing to the dot products.
__device__ __forceinline__ void copy_async(std::uint16_t* to, const std::uint16_t* from, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(shared_address(to)), "l"(from),
                 "r"(valid ? 16 : 0));
}

__device__ __forceinline__ void commit_copies() { asm volatile("cp.async.commit_group;"); }

template <int kPending>
__device__ __forceinline__ void wait_copies() {
    asm volatile("cp.async.wait_group %0;" ::"n"(kPending));
}

// Stages values [k0, k0 + kChunk) of rows [row0, row0 + kTile). Rows past `count` and values past the
// stride are zero.
__device__ __forceinline__ void stage_rows(std::uint16_t* to, const std::uint16_t* __restrict__ rows,
                                           std::size_t count, int stride, std::size_t row0, int k0, int tid) {
    constexpr int kPerRow = kChunk / kPiece;
    constexpr int kCopies = kTile * kPerRow / kThreads;
    static_assert(kCopies * kThreads == kTile * kPerRow, "whole copies per thread");
#pragma unroll
    for (int e = 0; e < kCopies; ++e) {
        const int item = tid + e * kThreads;
        const int r = item / kPerRow;
        const int k = (item % kPerRow) * kPiece;
        const std::size_t row = row0 + r;
        const bool valid = row < count && k0 + k < stride;
        copy_async(to + r * kStride + k, valid ? rows + row * stride + k0 + k : rows, valid);
    }
}

__device__ __forceinline__ void load_matrices(unsigned address, std::uint32_t (&out)[4]) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(out[0]), "=r"(out[1]), "=r"(out[2]), "=r"(out[3])
                 : "r"(address));
}

template <HalfType kType>
__device__ __forceinline__ void mma(float (&acc)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1) {
    if constexpr (kType == HalfType::f16) {
        asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
            "{%0, %1, %2, %3};"
            : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    } else {
        asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
            "{%0, %1, %2, %3};"
            : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
}

// acc += a . b over one k-step of one 16 x 8 tile; `pair` picks the tile's half of b's registers.
template <HalfType kType, int kProducts>
__device__ __forceinline__ void mma_step(float (&acc)[4], const std::uint32_t (&a_head)[4],
                                         const std::uint32_t (&a_tail)[4], const std::uint32_t (&b_head)[4],
                                         const std::uint32_t (&b_tail)[4], int pair) {
    const std::uint32_t h0 = b_head[2 * pair];
    const std::uint32_t h1 = b_head[2 * pair + 1];
    if constexpr (kProducts == 1) {
        mma<kType>(acc, a_head, h0, h1);
    } else {
        float step[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        if constexpr (kProducts == 3) {
            mma<kType>(step, a_tail, h0, h1);
        }
        mma<kType>(step, a_head, b_tail[2 * pair], b_tail[2 * pair + 1]);
        mma<kType>(step, a_head, h0, h1);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            acc[e] = __fadd_rn(acc[e], step[e]);
        }
    }
}

template <HalfType kType, int kProducts>
__global__ void __launch_bounds__(kThreads, kProducts == 1 ? 2 : 1)
    fast_assign_half_kernel(HalfAssignArgs a) {
    extern __shared__ __align__(16) std::uint16_t staged[];
    auto stage = [&](int array, int slot) { return staged + (array * kStages + slot) * kStageValues; };

    const int tid = threadIdx.x;
    const int lane = tid % kWarp;
    const int warp = tid / kWarp;
    const int warp_row = (warp / 2) * kWarpRows;
    const int warp_col = (warp % 2) * kWarpCols;
    const int group = lane / 4;  // row of the accumulator fragments
    const int quad = lane % 4;   // column pair of the accumulator fragments
    const std::size_t row0 = static_cast<std::size_t>(blockIdx.x) * kTile;
    const int stride = a.stride;

    // ldmatrix: lane l addresses row l % 8 of matrix l / 8. For A the matrices are (rows 0-7, k 0-7),
    // (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15) of a row tile: a0..a3. For B they are
    // (anchors 0-7, k 0-7), (0-7, k 8-15), (8-15, k 0-7), (8-15, k 8-15) of a column-tile pair.
    const int matrix = lane / 8;
    const int a_offset = (warp_row + lane % 8 + (matrix % 2) * 8) * kStride + (matrix / 2) * 8;
    const int b_offset = (warp_col + lane % 8 + (matrix / 2) * 8) * kStride + (matrix % 2) * 8;

    // Owned row o is row (o / 2) * 16 + (o % 2) * 8 + group of the warp's rows.
    Candidate top[kOwnedRows];
#pragma unroll
    for (int o = 0; o < kOwnedRows; ++o) {
        top[o] = empty_candidate();
    }

    // One pipeline runs through the steps (anchor tile, chunk of coordinates) of all this block's
    // tiles in order, so that the loads of a tile's first chunks overlap the previous tile's last
    // chunks and its epilogue.
    const int chunks = static_cast<int>(ceil_div(static_cast<std::size_t>(stride), kChunk));
    const TileRange tiles = split_tiles(a.m, a.tiles_per_split);
    const int steps = static_cast<int>(tiles.end - tiles.begin) * chunks;
    auto tile_start = [&](int step) { return (tiles.begin + step / chunks) * kTile; };
    auto stage_step = [&](int step, int slot) {
        const int k0 = (step % chunks) * kChunk;
        const std::size_t col0 = tile_start(step);
        stage_rows(stage(0, slot), a.point_head, a.n, stride, row0, k0, tid);
        stage_rows(stage(1, slot), a.anchor_head, a.m, stride, col0, k0, tid);
        if constexpr (kProducts >= 2) {
            stage_rows(stage(2, slot), a.anchor_tail, a.m, stride, col0, k0, tid);
        }
        if constexpr (kProducts == 3) {
            stage_rows(stage(3, slot), a.point_tail, a.n, stride, row0, k0, tid);
        }
    };

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
    // Every thread commits one group per step, empty past the end, so that waiting for all but the
    // last kStages - 2 groups always means "the current step has landed".
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
        if (s < steps) {
            stage_step(s, s);
        }
        commit_copies();
    }
    for (int step = 0; step < steps; ++step) {
        wait_copies<kStages - 2>();
        __syncthreads();  // this step is in for everyone, and the previous one is no longer read
        const int ahead = step + kStages - 1;
        if (ahead < steps) {
            stage_step(ahead, ahead % kStages);
        }
        commit_copies();
        const int slot = step % kStages;
        const unsigned a_head_base = shared_address(stage(0, slot) + a_offset);
        const unsigned b_head_base = shared_address(stage(1, slot) + b_offset);
        const unsigned b_tail_base = shared_address(stage(kProducts >= 2 ? 2 : 1, slot) + b_offset);
        const unsigned a_tail_base = shared_address(stage(kProducts == 3 ? 3 : 0, slot) + a_offset);
#pragma unroll
        for (int kk = 0; kk < kChunk; kk += kMmaK) {
            std::uint32_t a_head[kRowTiles][4];
            std::uint32_t a_tail[kRowTiles][4];
#pragma unroll
            for (int i = 0; i < kRowTiles; ++i) {
                const unsigned offset = (i * kMmaM * kStride + kk) * 2;
                load_matrices(a_head_base + offset, a_head[i]);
                if constexpr (kProducts == 3) {
                    load_matrices(a_tail_base + offset, a_tail[i]);
                }
            }
#pragma unroll
            for (int p = 0; p < kColTiles / 2; ++p) {
                const unsigned offset = (p * 2 * kMmaN * kStride + kk) * 2;
                std::uint32_t b_head[4];
                std::uint32_t b_tail[4];
                load_matrices(b_head_base + offset, b_head);
                if constexpr (kProducts >= 2) {
                    load_matrices(b_tail_base + offset, b_tail);
                }
#pragma unroll
                for (int i = 0; i < kRowTiles; ++i) {
                    mma_step<kType, kProducts>(acc[i][2 * p], a_head[i], a_tail[i], b_head, b_tail, 0);
                    mma_step<kType, kProducts>(acc[i][2 * p + 1], a_head[i], a_tail[i], b_head, b_tail, 1);
                }
            }
        }
        if (step % chunks != chunks - 1) {
            continue;
        }

        // The tile is complete. Accumulator e of tile (i, j) is row i * 16 + (e / 2) * 8 + group,
        // column j * 8 + quad * 2 + e % 2. The dot products come out scaled by 2^(2 exponent); a.scale
        // = 2^(1 - 2 exponent) undoes that and doubles them, exactly. Past the last anchor the value
        // is +inf, which no list takes.
        const std::size_t col0 = tile_start(step) + warp_col + quad * 2;
        // Read per value rather than held for all rows: the registers are what keeps two blocks per SM.
        auto c_norm = [&](int e) {
            const std::size_t col = col0 + (e / 2) * kMmaN + e % 2;
            return col < a.m ? __ldg(a.anchor_norms + col) : CUDART_INF_F;
        };
#pragma unroll
        for (int o = 0; o < kOwnedRows; ++o) {
            // Value e of the row is column (e / 2) * 8 + e % 2 of the thread's columns.
            auto dot = [&](int e) -> float& { return acc[o / 2][e / 2][(o % 2) * 2 + e % 2]; };
#pragma unroll
            for (int e = 0; e < 2 * kColTiles; ++e) {
                dot(e) = fmaf(-a.scale, dot(e), c_norm(e));
            }
            offer_all<2 * kColTiles>([&](int e) { return dot(e); },
                                     [&](int e) { return static_cast<std::uint32_t>(col0 + (e / 2) * kMmaN + e % 2); },
                                     top[o]);
#pragma unroll
            for (int e = 0; e < 2 * kColTiles; ++e) {
                dot(e) = 0.0f;
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
            if (row0 + r < a.n) {
                a.candidates[static_cast<std::size_t>(blockIdx.y) * a.n + row0 + r] = top[o];
            }
        }
    }
}

template <HalfType kType, int kProducts>
void launch(const HalfAssignArgs& a, cudaStream_t stream) {
    constexpr std::size_t bytes = shared_bytes(kProducts);
    // More than the default 48 KiB of dynamic shared memory needs the kernel's consent on the current device.
    CUDA_CHECK(cudaFuncSetAttribute(fast_assign_half_kernel<kType, kProducts>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
    const dim3 tiles(static_cast<unsigned>(ceil_div(a.n, kTile)), static_cast<unsigned>(a.splits));
    fast_assign_half_kernel<kType, kProducts><<<tiles, kThreads, bytes, stream>>>(a);
    check_launch("fast_assign_half_kernel", stream);
}

}  // namespace

void launch_fast_assign_half(const HalfAssignArgs& a, cudaStream_t stream) {
    const bool f16 = a.type == HalfType::f16;
    switch (a.products) {
    case 1:
        return f16 ? launch<HalfType::f16, 1>(a, stream) : launch<HalfType::bf16, 1>(a, stream);
    case 2:
        return f16 ? launch<HalfType::f16, 2>(a, stream) : launch<HalfType::bf16, 2>(a, stream);
    case 3:
        if (f16) {
            return launch<HalfType::f16, 3>(a, stream);
        }
        break;
    }
    throw Error("fast assign: no half-precision kernel for " + std::to_string(a.products) + " products of " +
                (f16 ? "float16" : "bfloat16"));
}

// Bounds on |fast - exact| of a distance relative to ||x||^2 + ||c||^2 (2 |x.c| is at most that).
// Operands: with u the type's unit roundoff (float16 2^-11, bfloat16 2^-8), a head is within u of
// its value and head + tail within u^2; the products then miss at most (2u + u^2), u^2 (points
// exact) or ~3u^2 (bounded by 4u^2) of |x||c|. Products of 16-bit values are exact in float32; each
// mma adds 16 of them to its accumulator, every term taken as truncated (two units of 2^-24 of the
// running magnitude, at most sum |x_k c_k| (1 + u)^2). One product per step accumulates over all
// steps; more go through a fresh accumulator per step (that step's mma only) and one rounded
// addition per step. The norms and the epilogue's two operations add 8 units of 2^-24.
float half_rounding_factor(HalfType type, int products, int d) {
    const double unit = type == HalfType::f16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
    const double u32 = std::ldexp(1.0, -24);
    const double steps = std::ceil(half_stride(d) / static_cast<double>(kMmaK));
    const double per_mma = 2.0 * (kMmaK + 1);
    double operands = 0.0;
    double accumulation = 0.0;
    switch (products) {
    case 1:
        operands = 2.0 * unit + unit * unit;
        accumulation = per_mma * steps;
        break;
    case 2:
        operands = unit * unit;
        accumulation = 2.0 * per_mma + steps;
        break;
    default:
        operands = 4.0 * unit * unit;
        accumulation = 3.0 * per_mma + steps;
        break;
    }
    const double magnitude = (1.0 + unit) * (1.0 + unit);
    return static_cast<float>(operands + (accumulation * magnitude + 8.0) * u32);
}

// Values below the 16-bit type's normal range round to a multiple of 2^-24 (float16's smallest
// step; bfloat16's is far smaller) in the scaled domain, whatever their size: an absolute error per
// coordinate that no relative bound covers. With scaled points under 2^15 and anchors under 2^16
// (larger anchors set kHalfOverflow), three such terms per coordinate and product stay under
// 2^-4 d 2^(-2 exponent) in a distance.
float half_absolute_bound(int d, int exponent) {
    return static_cast<float>(std::ldexp(static_cast<double>(d), -2 * exponent - 4));
}

}  // namespace vlattice::cuda
