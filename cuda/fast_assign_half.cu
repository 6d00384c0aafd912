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
// With more than one product, each chunk's products (two k-steps) go into a fresh accumulator that
// is then added to the running sum in float32, rounded to nearest: the tensor cores' own
// accumulation (taken as truncating) then only ever spans one chunk, which keeps the exact repair's
// window a few times narrower than float32 FMAs at d = 768, for one addition per two k-steps.
#include "fast_assign.cuh"

#include "cuda_check.hpp"

#include <cuda/atomic>
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

// 16 bytes from global memory to the shared address `to`, asynchronously; with `valid` false, zeros
// instead, which add nothing to the dot products.
__device__ __forceinline__ void copy_async(unsigned to, const std::uint16_t* from, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(to), "l"(from), "r"(valid ? 16 : 0));
}

// 4 bytes, for the anchors' norms (their buffer has no padding to read 16 bytes past its end).
__device__ __forceinline__ void copy_async_word(float* to, const float* from, bool valid) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(shared_address(to)), "l"(from),
                 "r"(valid ? 4 : 0));
}

__device__ __forceinline__ void commit_copies() { asm volatile("cp.async.commit_group;"); }

template <int kPending>
__device__ __forceinline__ void wait_copies() {
    asm volatile("cp.async.wait_group %0;" ::"n"(kPending));
}

// What one thread copies of a staged tile: values [k0 + k, k0 + k + 8) of the tile's rows `row`
// and row + kTile / 2 (kTile rows of kChunk values, 16 bytes a copy, two copies per thread).
struct Pieces {
    static constexpr int kPerRow = kChunk / kPiece;
    static_assert(2 * kThreads * kPiece == kTile * kChunk, "two copies per thread");
    int row;
    int k;
    __device__ explicit Pieces(int tid) : row(tid / kPerRow), k((tid % kPerRow) * kPiece) {}
    // The shared offset, in values, of copy e within a staged array.
    __device__ int to(int e) const { return (row + e * kTile / 2) * kStride + k; }
};

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

// The products of one k-step of one 16 x 8 tile, added to acc by the tensor cores; `pair` picks
// the tile's half of b's registers.
template <HalfType kType, int kProducts>
__device__ __forceinline__ void mma_products(float (&acc)[4], const std::uint32_t (&a_head)[4],
                                             const std::uint32_t (&a_tail)[4], const std::uint32_t (&b_head)[4],
                                             const std::uint32_t (&b_tail)[4], int pair) {
    if constexpr (kProducts == 3) {
        mma<kType>(acc, a_tail, b_head[2 * pair], b_head[2 * pair + 1]);
    }
    if constexpr (kProducts >= 2) {
        mma<kType>(acc, a_head, b_tail[2 * pair], b_tail[2 * pair + 1]);
    }
    mma<kType>(acc, a_head, b_head[2 * pair], b_head[2 * pair + 1]);
}

// Where the staging stands in the block's sequence of steps (anchor tile, chunk of coordinates),
// advanced one step at a time: the loop neither divides by the chunk count nor multiplies by the
// stride.
struct StepCursor {
    int k0;                   // first coordinate of the chunk
    std::size_t col0;         // first anchor of the tile
    std::size_t tile_offset;  // col0 * stride: where the tile's rows start
    __device__ void advance(int stride) {
        k0 += kChunk;
        if (k0 >= stride) {
            k0 = 0;
            col0 += kTile;
            tile_offset += static_cast<std::size_t>(kTile) * stride;
        }
    }
};

template <HalfType kType, int kProducts>
__global__ void __launch_bounds__(kThreads, kProducts == 1 ? 2 : 1)
    fast_assign_half_kernel(HalfAssignArgs a) {
    extern __shared__ __align__(16) std::uint16_t staged[];
    auto stage = [&](int array, int slot) { return staged + (array * kStages + slot) * kStageValues; };
    // Per row, as ordered_bits, the least bound that any of the eight lists of the row (four lanes in
    // each of two warps) has found (see row_limit below): every list skips what cannot matter to any.
    __shared__ unsigned row_bound[kTile];
    // The squared norms of each staged tile's anchors, staged with the tile's first chunk.
    __shared__ float tile_norms[kStages][kTile];

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
    auto row_of = [&](int o) { return warp_row + (o / 2) * kMmaM + (o % 2) * 8 + group; };
    Candidate top[kOwnedRows];
    // A value at or above best + window[o] (window: the repair's window for the row, at its widest)
    // is outside the window of the row's final best, so it can neither join the repair's short list
    // nor change whether more anchors than the list holds are inside the window: the lists skip it.
    // Together with the shared row bound this keeps the lanes of a warp from walking insertions for
    // anchors that cannot matter, which without it happened on nearly every tile.
    float window[kOwnedRows];
    const float max_anchor_norm = __uint_as_float(*a.max_anchor_norm_bits);
#pragma unroll
    for (int o = 0; o < kOwnedRows; ++o) {
        top[o] = empty_candidate();
        const std::size_t row = row0 + row_of(o);
        const float x_norm = row < a.n ? a.point_norms[row] : 0.0f;
        window[o] = a.window_factor * (2.0f * x_norm + 2.0f * max_anchor_norm) + a.window_absolute;
    }
    auto row_limit = [&](int o) { return fminf(top[o].next, top[o].dist[0] + window[o]); };
    for (int r = tid; r < kTile; r += kThreads) {
        row_bound[r] = ordered_bits(CUDART_INF_F);
    }

    // One pipeline runs through the steps (anchor tile, chunk of coordinates) of all this block's
    // tiles in order, so that the loads of a tile's first chunks overlap the previous tile's last
    // chunks and its epilogue.
    const int chunks = static_cast<int>(ceil_div(static_cast<std::size_t>(stride), kChunk));
    const TileRange tiles = split_tiles(a.m, a.tiles_per_split);
    const unsigned steps = static_cast<unsigned>(tiles.end - tiles.begin) * chunks;
    // Staging, with what does not change per step worked out once: the thread's pieces as 32-bit
    // offsets from the first row of a tile, the shared addresses of the staged arrays, the block's
    // first point row.
    const Pieces pieces(tid);
    const unsigned staged_base = shared_address(staged);
    auto stage_address = [&](int array, unsigned slot, int e) {
        return staged_base + 2u * ((array * kStages + slot) * kStageValues + pieces.to(e));
    };
    const unsigned copy_offset[2] = {static_cast<unsigned>(pieces.row * stride + pieces.k),
                                     static_cast<unsigned>((pieces.row + kTile / 2) * stride + pieces.k)};
    const std::uint16_t* const point_head = a.point_head + row0 * stride;
    const std::uint16_t* const point_tail = kProducts == 3 ? a.point_tail + row0 * stride : nullptr;
    const int rows_here = a.n - row0 < kTile ? static_cast<int>(a.n - row0) : kTile;
    auto stage_step = [&](const StepCursor& at, unsigned slot) {
        if (at.k0 == 0 && tid < kTile) {
            const bool valid = at.col0 + tid < a.m;
            copy_async_word(&tile_norms[slot][tid], valid ? a.anchor_norms + at.col0 + tid : a.anchor_norms, valid);
        }
        const bool k_inside = at.k0 + pieces.k < stride;
        const int anchor_rows = at.col0 + kTile <= a.m ? kTile : static_cast<int>(a.m - at.col0);
        const std::uint16_t* const anchor_head = a.anchor_head + at.tile_offset;
        const std::uint16_t* const anchor_tail = kProducts >= 2 ? a.anchor_tail + at.tile_offset : nullptr;
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            // Invalid copies read nothing, from the first value of the rows.
            const int r = pieces.row + e * kTile / 2;
            const unsigned offset = copy_offset[e] + at.k0;
            const bool point_valid = k_inside && r < rows_here;
            const unsigned point_at = point_valid ? offset : 0u;
            copy_async(stage_address(0, slot, e), point_head + point_at, point_valid);
            if constexpr (kProducts == 3) {
                copy_async(stage_address(3, slot, e), point_tail + point_at, point_valid);
            }
            const bool anchor_valid = k_inside && r < anchor_rows;
            const unsigned anchor_at = anchor_valid ? offset : 0u;
            copy_async(stage_address(1, slot, e), anchor_head + anchor_at, anchor_valid);
            if constexpr (kProducts >= 2) {
                copy_async(stage_address(2, slot, e), anchor_tail + anchor_at, anchor_valid);
            }
        }
    };

    // Every thread commits one group per step, empty past the end, so that waiting for all but the
    // last kStages - 2 groups always means "the current step has landed".
    StepCursor ahead{0, tiles.begin * kTile, tiles.begin * kTile * stride};
#pragma unroll
    for (unsigned s = 0; s < kStages - 1; ++s) {
        if (s < steps) {
            stage_step(ahead, s);
            ahead.advance(stride);
        }
        commit_copies();
    }
    unsigned step = 0;
    // Waits for the current step's copies, queues those kStages - 1 steps ahead, and returns the
    // current step's slot.
    auto begin_step = [&]() {
        wait_copies<kStages - 2>();
        __syncthreads();  // this step is in for everyone, and the previous one is no longer read
        if (step + kStages - 1 < steps) {
            stage_step(ahead, (step + kStages - 1) % kStages);
            ahead.advance(stride);
        }
        commit_copies();
        return step++ % kStages;
    };

    float acc[kRowTiles][kColTiles][4];
    // One chunk of every tile of the warp. One product accumulates in place. Split products go
    // through a fresh accumulator per tile and chunk, added rounded to nearest; for that, the loop
    // over the chunk's k-steps is the innermost, with the fragments of both loaded first.
    auto multiply_chunk = [&](unsigned slot) {
        const unsigned a_head_base = shared_address(stage(0, slot) + a_offset);
        const unsigned b_head_base = shared_address(stage(1, slot) + b_offset);
        const unsigned b_tail_base = shared_address(stage(kProducts >= 2 ? 2 : 1, slot) + b_offset);
        const unsigned a_tail_base = shared_address(stage(kProducts == 3 ? 3 : 0, slot) + a_offset);
        constexpr int kSteps = kProducts == 1 ? 1 : kChunk / kMmaK;  // k-steps whose fragments are held at once
#pragma unroll
        for (int k_outer = 0; k_outer < kChunk; k_outer += kSteps * kMmaK) {
            std::uint32_t a_head[kSteps][kRowTiles][4];
            std::uint32_t a_tail[kSteps][kRowTiles][4];
#pragma unroll
            for (int s = 0; s < kSteps; ++s) {
#pragma unroll
                for (int i = 0; i < kRowTiles; ++i) {
                    const unsigned offset = (i * kMmaM * kStride + k_outer + s * kMmaK) * 2;
                    load_matrices(a_head_base + offset, a_head[s][i]);
                    if constexpr (kProducts == 3) {
                        load_matrices(a_tail_base + offset, a_tail[s][i]);
                    }
                }
            }
#pragma unroll
            for (int p = 0; p < kColTiles / 2; ++p) {
                std::uint32_t b_head[kSteps][4];
                std::uint32_t b_tail[kSteps][4];
#pragma unroll
                for (int s = 0; s < kSteps; ++s) {
                    const unsigned offset = (p * 2 * kMmaN * kStride + k_outer + s * kMmaK) * 2;
                    load_matrices(b_head_base + offset, b_head[s]);
                    if constexpr (kProducts >= 2) {
                        load_matrices(b_tail_base + offset, b_tail[s]);
                    }
                }
#pragma unroll
                for (int i = 0; i < kRowTiles; ++i) {
#pragma unroll
                    for (int pair = 0; pair < 2; ++pair) {
                        float(&tile)[4] = acc[i][2 * p + pair];
                        if constexpr (kProducts == 1) {
                            mma_products<kType, kProducts>(tile, a_head[0][i], a_tail[0][i], b_head[0], b_tail[0],
                                                           pair);
                        } else {
                            float fresh[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
                            for (int s = 0; s < kSteps; ++s) {
                                mma_products<kType, kProducts>(fresh, a_head[s][i], a_tail[s][i], b_head[s],
                                                               b_tail[s], pair);
                            }
#pragma unroll
                            for (int e = 0; e < 4; ++e) {
                                tile[e] = __fadd_rn(tile[e], fresh[e]);
                            }
                        }
                    }
                }
            }
        }
    };

    const float norm_scale = -1.0f / a.scale;
    const int my_col = warp_col + quad * 2;  // of the thread's first column in a tile
    for (std::size_t col0 = tiles.begin * kTile; col0 < tiles.end * kTile; col0 += kTile) {
        // The accumulators start at -||c||^2 2^(2 exponent - 1), so that the tensor cores leave
        // ||c||^2 - 2 x.c scaled by -1/a.scale: a tile then costs the epilogue one comparison per
        // value. Past the last anchor they start at -inf, which no list takes.
        const unsigned first = begin_step();
        const bool whole = col0 + kTile <= a.m;  // every tile but perhaps the last
#pragma unroll
        for (int j = 0; j < kColTiles; ++j) {
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                const int col = my_col + j * kMmaN + half;
                const float start = whole || col0 + col < a.m ? tile_norms[first][col] * norm_scale : -CUDART_INF_F;
#pragma unroll
                for (int i = 0; i < kRowTiles; ++i) {
                    acc[i][j][half] = start;
                    acc[i][j][2 + half] = start;
                }
            }
        }
        multiply_chunk(first);
        for (int chunk = 1; chunk < chunks; ++chunk) {
            multiply_chunk(begin_step());
        }

        // The tile is complete. Accumulator e of tile (i, j) is row i * 16 + (e / 2) * 8 + group,
        // column j * 8 + quad * 2 + e % 2, and holds (||c||^2 - 2 x.c) / -a.scale: scaled by a power
        // of two, so the largest accumulator is the least value, and -a.scale times it is exact.
        const std::size_t first_col = col0 + my_col;
#pragma unroll
        for (int o = 0; o < kOwnedRows; ++o) {
            // Value e of the row is column (e / 2) * 8 + e % 2 of the thread's columns.
            auto held = [&](int e) { return acc[o / 2][e / 2][(o % 2) * 2 + e % 2]; };
            float largest = held(0);
#pragma unroll
            for (int e = 1; e < 2 * kColTiles; ++e) {
                largest = fmaxf(largest, held(e));
            }
            // Other lanes may lower the shared bound meanwhile (atomically): a read that misses that
            // only sees a larger bound, which is still one.
            unsigned* shared_bound = &row_bound[row_of(o)];
            const unsigned published =
                ::cuda::atomic_ref<unsigned, ::cuda::thread_scope_block>(*shared_bound).load(::cuda::memory_order_relaxed);
            const float bound = fminf(from_ordered_bits(published), row_limit(o));
            if (!(-a.scale * largest < bound)) {
                continue;
            }
#pragma unroll
            for (int e = 0; e < 2 * kColTiles; ++e) {
                const float value = -a.scale * held(e);
                if (value < bound) {
                    offer(value, static_cast<std::uint32_t>(first_col + (e / 2) * kMmaN + e % 2), top[o]);
                }
            }
            const float limit = row_limit(o);
            if (limit < bound) {
                atomicMin(shared_bound, ordered_bits(limit));
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
            exchange[row_of(o)] = top[o];
        }
    }
    __syncthreads();
    if (warp_col == 0 && quad == 0) {
#pragma unroll
        for (int o = 0; o < kOwnedRows; ++o) {
            const int r = row_of(o);
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
// mma adds 16 of them to its accumulator, every term taken as truncated: two units of 2^-24 of the
// running magnitude. That magnitude is at most sum |x_k c_k| (1 + u)^2 for an accumulator that
// starts at zero, and ||c||^2 / 2 more for one that starts at -||c||^2 / 2, which makes it at most
// (1 + (1 + u)^2) / 2 of ||x||^2 + ||c||^2 instead of (1 + u)^2 / 2. One product per step
// accumulates into the tile's accumulator over all steps; more go through a fresh one per chunk
// (that chunk's mma only, each bounded by the chunk's magnitude), added to the tile's with one
// rounded addition per chunk. The norms and the epilogue's operations add 8 units of 2^-24.
float half_rounding_factor(HalfType type, int products, int d) {
    const double unit = type == HalfType::f16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
    const double u32 = std::ldexp(1.0, -24);
    const double steps = std::ceil(half_stride(d) / static_cast<double>(kMmaK));
    const double chunks = std::ceil(half_stride(d) / static_cast<double>(kChunk));
    const double per_mma = 2.0 * (kMmaK + 1);
    const double per_chunk = per_mma * (kChunk / kMmaK);  // a fresh accumulator's mma per product
    const double fresh = (1.0 + unit) * (1.0 + unit);
    const double started = 1.0 + fresh;
    double operands = 0.0;
    double accumulation = 0.0;
    switch (products) {
    case 1:
        operands = 2.0 * unit + unit * unit;
        accumulation = per_mma * steps * started;
        break;
    case 2:
        operands = unit * unit;
        accumulation = 2.0 * per_chunk * fresh + chunks * started;
        break;
    default:
        operands = 4.0 * unit * unit;
        accumulation = 3.0 * per_chunk * fresh + chunks * started;
        break;
    }
    return static_cast<float>(operands + (accumulation + 8.0) * u32);
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
