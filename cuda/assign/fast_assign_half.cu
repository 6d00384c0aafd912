// The tensor-core fast assign from staged 16-bit operands (float16 or bfloat16) with float32
// accumulators, reading operands that half_operands.cu wrote once: the points at upload, the anchors
// once per assign. Tiles of points and anchors stream into shared memory through a cp.async
// pipeline, laid out as 8 x 8 core matrices of 128 contiguous bytes, which wgmma reads through its
// descriptors and ldmatrix without bank conflicts; each warp's 16 points (32 with one product on
// mma.sync) meet the tile's 128 anchors, and nothing is converted in the loop. Two engines run the
// same kernel: Hopper's wgmma (a warpgroup multiplies 64 points by the tile at once,
// asynchronously) and the warp-level mma.sync of every GPU since Ampere (mma_sync.cuh); they leave
// the same fragment, so the epilogue is shared.
//
// kProducts picks how much of float32's precision the products keep:
//   1  head x head, scored against the rows' own rounding (single_window.cuh); on wgmma this is
//      fast_assign_single.cu's kernel, here only on mma_sync;
//   2  x x (head + tail) of the anchors, for points that are exact in the type (a float16 input, or
//      integers such as pixels): a product error of 2^-22;
//   3  head x head + head x tail + tail x head: 2^-20 for any float32 points.
// With two and three, each chunk's products (two k-steps) go into a fresh accumulator that is then
// added to the running sum in float32, rounded to nearest: the tensor cores' own accumulation (taken
// as truncating) then only ever spans one chunk, which keeps the exact repair's window a few times
// narrower than float32 FMAs at d = 768, for one addition per two k-steps. mma.sync, being
// synchronous, does that per 16 x 8 block with four registers of fresh sums instead of 64.
#include "assign/fast_assign.cuh"
#include "assign/fragment_offers.cuh"
#include "assign/single_window.cuh"
#include "math/mma_sync.cuh"
#include "math/wgmma.cuh"
#include "runtime/launch.hpp"

#include "runtime/cuda_check.hpp"

#include <math_constants.h>

#include <cmath>
#include <type_traits>

namespace vlattice::cuda {

namespace {

constexpr int kTile = kFastTile;  // anchors per tile, and points per block of one half per warp
constexpr int kChunk = 32;        // 16-bit values per staged row: two k-steps
// Stages of the staging ring, and the steps whose copies are in flight ahead of the current one. On
// wgmma two fewer than the stages: the slot refilled at a step was read by the wgmma of two steps
// before, which may still be running during the one before. mma.sync has read its slot by the time
// the block meets at the next step, and its three stages (with three products: four arrays of 8 KiB
// each) fit the 99 KiB of shared memory that Ampere's and Ada's smaller parts give a block.
__host__ __device__ constexpr int stages_of(TensorEngine engine) { return engine == TensorEngine::wgmma ? 5 : 3; }
__host__ __device__ constexpr int ahead_of(TensorEngine engine) {
    return stages_of(engine) - (engine == TensorEngine::wgmma ? 2 : 1);
}
constexpr int kThreads = 256;  // eight warps (two warpgroups), each all 128 anchors of the tile
constexpr int kPiece = 8;      // 16-bit values per 16-byte copy
static_assert(kTile == 2 * kGroupRows && kThreads == 2 * 128, "two warpgroups of 64 rows");
static_assert(kChunk % kMmaK == 0 && kChunk % kPiece == 0, "whole k-steps and copies per chunk");

// A staged tile is 8 x 8 core matrices of 128 contiguous bytes: those along k 128 bytes apart, the
// 8-row groups kChunk / 8 core matrices apart. Value (row, k) sits at:
__host__ __device__ constexpr int core_offset(int row, int k) {
    return (row / 8) * (8 * kChunk) + (k / kPiece) * 64 + (row % 8) * kPiece + k % kPiece;
}
constexpr unsigned kCoreK = 128;                   // bytes between core matrices along k
constexpr unsigned kCoreRows = 8 * kChunk * 2;     // bytes between 8-row groups

// Points per block: 16 per warp, or on mma.sync with one product 32 (two halves of 16 rows), so that
// every anchor fragment read from shared memory meets twice the points. Split products keep 16: their
// fresh sums per chunk and 16-bit tails leave no registers for a second half.
__host__ __device__ constexpr int halves_of(TensorEngine engine, int products) {
    return engine == TensorEngine::mma_sync && products == 1 ? 2 : 1;
}
__host__ __device__ constexpr int points_of(TensorEngine engine, int products) {
    return kTile * halves_of(engine, products);
}

// Staged arrays, in this order: anchor heads, anchor tails (2 and 3 products), then unless the points
// are resident, point heads and point tails (3 products). An anchor array's slot holds kTile rows of a
// chunk, a point array's the block's points.
__host__ __device__ constexpr int anchor_arrays(int products) { return products == 1 ? 1 : 2; }
__host__ __device__ constexpr int point_arrays(int products) { return products == 3 ? 2 : 1; }
std::size_t stage_bytes(TensorEngine engine, int products, bool resident) {
    const std::size_t rows = anchor_arrays(products) * std::size_t{kTile} +
                             (resident ? 0 : point_arrays(products) * std::size_t(points_of(engine, products)));
    return std::size_t{2} * stages_of(engine) * rows * kChunk;
}

// When the block's points fit in this many bytes of shared memory (d up to 256 with two products,
// 128 with three), they are copied once and stay, and only the anchors stream: every tile then
// reads fewer bytes from L2, which ncu showed to be the kernel's limit at d = 128. Their rows are
// padded to whole chunks, with zeros.
constexpr std::size_t kResidentBytes = std::size_t{64} << 10;
__host__ __device__ inline int resident_stride(int stride) { return (stride + kChunk - 1) / kChunk * kChunk; }
std::size_t resident_bytes(TensorEngine engine, int products, int stride) {
    return std::size_t{2} * point_arrays(products) * points_of(engine, products) * resident_stride(stride);
}
// Dynamic shared memory: the resident points if any, then the staging slots.
std::size_t shared_bytes(TensorEngine engine, int products, bool resident, int stride) {
    const std::size_t stages = stage_bytes(engine, products, resident);
    return resident ? resident_bytes(engine, products, stride) + stages : stages;
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

// What one thread copies of a staged chunk: values [k0 + k, k0 + k + 8) of rows `row`, row + 64,
// and so on (two rows of an anchor tile, two per half of the block's points). Eight neighbouring
// threads take eight rows of one core matrix: their 16-byte writes fill 128 contiguous bytes, free of
// bank conflicts.
constexpr int kPieceRows = kThreads * kPiece / kChunk;  // rows one copy by every thread covers
struct Pieces {
    static_assert(2 * kPieceRows == kTile, "two copies per thread and tile");
    static_assert(kChunk / kPiece == 4, "a warp covers 8 rows x 4 pieces");
    int row;
    int k;
    __device__ explicit Pieces(int tid) : row(tid % 8 + 8 * (tid / 32)), k((tid / 8) % 4 * kPiece) {}
    // The shared offset, in values, of copy e within a staged array.
    __device__ int to(int e) const { return core_offset(row + e * kPieceRows, k); }
};

// A wgmma matrix descriptor for the core matrices from shared address `address` (no swizzle), with
// `rows_apart` bytes between 8-row groups.
__device__ __forceinline__ std::uint64_t descriptor(unsigned address, unsigned rows_apart = kCoreRows) {
    return static_cast<std::uint64_t>((address & 0x3ffff) >> 4) | static_cast<std::uint64_t>(kCoreK >> 4) << 16 |
           static_cast<std::uint64_t>(rows_apart >> 4) << 32;
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

template <TensorEngine kEngine, HalfType kType, int kProducts, bool kResident>
__global__ void __launch_bounds__(kThreads, 1)
    fast_assign_half_kernel(HalfAssignArgs a) {
    static_assert(kProducts >= 1 && kProducts <= 3, "one, two or three products");
    constexpr int kStages = stages_of(kEngine);
    constexpr int kAhead = ahead_of(kEngine);
    constexpr bool kSingle = kProducts == 1;
    constexpr int kHalves = halves_of(kEngine, kProducts);
    constexpr int kPoints = points_of(kEngine, kProducts);
    static_assert(kEngine == TensorEngine::mma_sync || kHalves == 1, "a wgmma warpgroup takes 64 rows");
    extern __shared__ __align__(128) std::uint16_t shared[];
    // Resident points: rows of resident_stride values as core matrices, heads then tails.
    const int rstride = kResident ? resident_stride(a.stride) : 0;
    std::uint16_t* const resident = shared;
    std::uint16_t* const staged = shared + point_arrays(kProducts) * kPoints * rstride;
    // Staged anchor arrays first, then point arrays, each kStages slots of a chunk's rows.
    constexpr int kAnchorSlot = kTile * kChunk;
    constexpr int kPointSlot = kPoints * kChunk;
    constexpr int kPointHead = anchor_arrays(kProducts);  // staged array of the point heads, tails next
    auto slot_offset = [&](int array, unsigned slot) {
        constexpr int kPointBase = kPointHead * kStages * kAnchorSlot;
        return array < kPointHead ? (array * kStages + slot) * kAnchorSlot
                                  : kPointBase + ((array - kPointHead) * kStages + slot) * kPointSlot;
    };
    auto stage = [&](int array, unsigned slot) { return staged + slot_offset(array, slot); };
    // Per row, as ordered_bits, the least bound that any of the four lists of the row has found (see
    // offer_fragment_row): every list skips what cannot matter to any.
    __shared__ unsigned row_bound[kPoints];
    // The squared norms of each staged tile's anchors (of their heads, for one product), staged with
    // the tile's first chunk; for one product also kept for the tile's epilogue, as the slot they
    // came in is refilled before it.
    __shared__ float tile_norms[kStages][kTile];
    __shared__ float epilogue_norms[kSingle ? kTile : 1];

    const int tid = threadIdx.x;
    const int lane = tid % kWarp;
    const int group_row = (tid / 128) * kGroupRows;  // the warpgroup's first point (wgmma)
    const int warp_row = (tid / kWarp) * 16 * kHalves;
    const int group = lane / 4;  // row of the accumulator fragments
    const int quad = lane % 4;   // column pair of the accumulator fragments
    const std::size_t row0 = static_cast<std::size_t>(blockIdx.x) * kPoints;
    const int stride = a.stride;

    // Owned row o of half h is row o * 8 + group of the half's 16; its value e is accumulator
    // (e / 2) * 4 + o * 2 + e % 2 of the half, column (e / 2) * 8 + quad * 2 + e % 2.
    auto row_of = [&](int h, int o) { return warp_row + h * 16 + o * 8 + group; };
    Candidate top[kHalves][kOwnedRows];
    // The repair's window per owned row (at its widest for split products, from the row's own
    // rounding for one), and the row's limit (offer_fragment_row).
    using Window = std::conditional_t<kSingle, RowWindow, FixedWindow>;
    Window window[kHalves][kOwnedRows];
    float limit[kHalves][kOwnedRows];
    const float max_anchor_norm = kSingle ? 0.0f : __uint_as_float(*a.max_anchor_norm_bits);
#pragma unroll
    for (int h = 0; h < kHalves; ++h) {
#pragma unroll
        for (int o = 0; o < kOwnedRows; ++o) {
            const std::size_t row = row0 + row_of(h, o);
            top[h][o] = empty_candidate();
            limit[h][o] = CUDART_INF_F;
            if constexpr (kSingle) {
                window[h][o] = single_row_window(a.single, row, a.n, true);
                // Values beyond the window of the last assign's anchor can never matter.
                const float prior = prior_best(a.single, a.prior, row, a.n, a.m);
                limit[h][o] = prior < CUDART_INF_F ? prior + window[h][o](prior) : CUDART_INF_F;
            } else {
                window[h][o] = FixedWindow{row_window(a, row, max_anchor_norm)};
            }
        }
    }
    for (int r = tid; r < kPoints; r += kThreads) {
        row_bound[r] = ordered_bits(CUDART_INF_F);
    }

    // One pipeline runs through the steps (anchor tile, chunk of coordinates) of all this block's
    // tiles in order, so that the loads of a tile's first chunks overlap the previous tile's last
    // chunks and its epilogue.
    const int chunks = static_cast<int>(ceil_div(static_cast<std::size_t>(stride), kChunk));
    const TileRange tiles = split_tiles(a.m, a.tiles_per_split, blockIdx.y);
    const unsigned steps = static_cast<unsigned>(tiles.end - tiles.begin) * chunks;
    // Staging, with what does not change per step worked out once: the thread's pieces as 32-bit
    // offsets from the first row of a tile, the shared addresses of the staged arrays, the block's
    // first point row.
    const Pieces pieces(tid);
    const unsigned staged_base = shared_address(staged);
    auto stage_address = [&](int array, unsigned slot, int e) {
        return staged_base + 2u * (slot_offset(array, slot) + pieces.to(e));
    };
    const unsigned copy_offset = static_cast<unsigned>(pieces.row * stride + pieces.k);
    const unsigned copy_rows = static_cast<unsigned>(kPieceRows * stride);  // between a thread's copies
    const std::uint16_t* const point_head = a.point_head + row0 * stride;
    const std::uint16_t* const point_tail = kProducts == 3 ? a.point_tail + row0 * stride : nullptr;
    const int rows_here = a.n - row0 < kPoints ? static_cast<int>(a.n - row0) : kPoints;
    if constexpr (kResident) {
        // The block's points, once: a group of copies of its own, committed before the pipeline's,
        // so the first step's wait covers it.
        const int pieces_per_row = rstride / kPiece;
        for (int p = tid; p < kPoints * pieces_per_row; p += kThreads) {
            const int r = p / pieces_per_row;
            const int k = p % pieces_per_row * kPiece;
            const bool valid = r < rows_here && k < stride;
            const unsigned at = valid ? static_cast<unsigned>(r * stride + k) : 0u;
            const int to = (r / 8) * (8 * rstride) + (k / kPiece) * 64 + (r % 8) * kPiece;
            copy_async(shared_address(resident + to), point_head + at, valid);
            if constexpr (kProducts == 3) {
                copy_async(shared_address(resident + kPoints * rstride + to), point_tail + at, valid);
            }
        }
        commit_copies();
    }
    auto stage_step = [&](const StepCursor& at, unsigned slot) {
        if (at.k0 == 0 && tid < kTile) {
            const bool valid = at.col0 + tid < a.m;
            copy_async_word(&tile_norms[slot][tid], valid ? a.anchor_norms + at.col0 + tid : a.anchor_norms, valid);
        }
        const bool k_inside = at.k0 + pieces.k < stride;
        const int anchor_rows = at.col0 + kTile <= a.m ? kTile : static_cast<int>(a.m - at.col0);
        const std::uint16_t* const anchor_head = a.anchor_head + at.tile_offset;
        const std::uint16_t* const anchor_tail = kSingle ? nullptr : a.anchor_tail + at.tile_offset;
#pragma unroll
        for (int e = 0; e < 2 * kHalves; ++e) {
            // Invalid copies read nothing, from the first value of the rows.
            const int r = pieces.row + e * kPieceRows;
            const unsigned offset = copy_offset + e * copy_rows + at.k0;
            if constexpr (!kResident) {
                const bool point_valid = k_inside && r < rows_here;
                const unsigned point_at = point_valid ? offset : 0u;
                copy_async(stage_address(kPointHead, slot, e), point_head + point_at, point_valid);
                if constexpr (kProducts == 3) {
                    copy_async(stage_address(kPointHead + 1, slot, e), point_tail + point_at, point_valid);
                }
            }
            if (e >= 2) {
                continue;  // an anchor tile's rows take two copies
            }
            const bool anchor_valid = k_inside && r < anchor_rows;
            const unsigned anchor_at = anchor_valid ? offset : 0u;
            copy_async(stage_address(0, slot, e), anchor_head + anchor_at, anchor_valid);
            if constexpr (!kSingle) {
                copy_async(stage_address(1, slot, e), anchor_tail + anchor_at, anchor_valid);
            }
        }
    };

    // Every thread commits one group per step, empty past the end, so that waiting for all but the
    // last kAhead - 1 groups always means "the current step has landed".
    StepCursor ahead{0, tiles.begin * kTile, tiles.begin * kTile * stride};
#pragma unroll
    for (unsigned s = 0; s < kAhead; ++s) {
        if (s < steps) {
            stage_step(ahead, s);
            ahead.advance(stride);
        }
        commit_copies();
    }
    unsigned step = 0;
    // Waits for the current step's copies, queues those kAhead steps ahead, and returns the current
    // step's slot.
    auto begin_step = [&]() {
        wait_copies<kAhead - 1>();
        if constexpr (kEngine == TensorEngine::wgmma) {
            fence_proxy_async();
        }
        __syncthreads();  // this step is in for everyone, and the one kStages - kAhead back is no longer read
        if (step + kAhead < steps) {
            stage_step(ahead, (step + kAhead) % kStages);
            ahead.advance(stride);
        }
        commit_copies();
        return step++ % kStages;
    };

    // Shared addresses of the chunk's operands: the points' rows of the chunk (resident or staged),
    // with the bytes between their 8-row groups, and the staged anchors.
    const unsigned a_rows_apart = kResident ? 16u * rstride : kCoreRows;
    auto point_address = [&](unsigned slot, int k0, int tail) {
        if constexpr (kResident) {
            return shared_address(resident) + tail * 2u * kPoints * rstride + k0 / kPiece * kCoreK;
        } else {
            return shared_address(stage(kPointHead + tail, slot));
        }
    };

    // One chunk of the tile: on wgmma the warpgroup's 64 x 128 through a fresh accumulator (for split
    // products) added rounded to nearest once the chunk's wgmma are done.
    float acc[kHalves][kAccumulators];
    auto multiply_chunk_wgmma = [&](unsigned slot, int k0) {
        float fresh[kAccumulators];
        const unsigned a_head = point_address(slot, k0, 0) + group_row / 8 * a_rows_apart;
        const unsigned a_tail = kProducts == 3 ? point_address(slot, k0, 1) + group_row / 8 * a_rows_apart : a_head;
        const unsigned b_head = shared_address(stage(0, slot));
        const unsigned b_tail = shared_address(stage(1, slot));
        pin(acc[0]);
        wgmma_fence();
#pragma unroll
        for (int s = 0; s < kChunk / kMmaK; ++s) {
            const unsigned k_bytes = s * 2 * kCoreK;  // a k-step spans two core matrices along k
            if constexpr (kProducts == 3) {
                wgmma<kType>(fresh, descriptor(a_tail + k_bytes, a_rows_apart), descriptor(b_head + k_bytes), s > 0);
            }
            wgmma<kType>(fresh, descriptor(a_head + k_bytes, a_rows_apart), descriptor(b_tail + k_bytes),
                         kProducts == 3 || s > 0);
            wgmma<kType>(fresh, descriptor(a_head + k_bytes, a_rows_apart), descriptor(b_head + k_bytes), true);
        }
        wgmma_commit();
        wgmma_wait<0>();
        pin(acc[0]);
        pin(fresh);
#pragma unroll
        for (int e = 0; e < kAccumulators; ++e) {
            acc[0][e] = __fadd_rn(acc[0][e], fresh[e]);
        }
    };
    // On mma.sync each half of the warp's rows times the tile, a 16 x 8 block at a time: lane l gives
    // ldmatrix the row l % 8 of core matrix l / 8, which for the points is rows +8 for odd matrices
    // and values +8 for the last two, and for a pair of anchor blocks values +8 for odd matrices and
    // anchors +8 for the last two.
    const int matrix = lane / 8;
    const int point_row = warp_row + (matrix % 2) * 8 + lane % 8;
    const unsigned point_lane = point_row / 8 * a_rows_apart + point_row % 8 * 16 + matrix / 2 * kCoreK;
    const unsigned anchor_lane = matrix / 2 * kCoreRows + lane % 8 * 16 + matrix % 2 * kCoreK;
    constexpr unsigned kHalfRows = 2;  // 8-row groups between halves
    auto multiply_chunk_mma = [&](unsigned slot, int k0) {
        constexpr int kSteps = kChunk / kMmaK;
        unsigned head[kHalves][kSteps][4];
        unsigned tail[kSteps][4];
#pragma unroll
        for (int s = 0; s < kSteps; ++s) {
#pragma unroll
            for (int h = 0; h < kHalves; ++h) {
                load_matrices(head[h][s],
                              point_address(slot, k0, 0) + point_lane + h * kHalfRows * a_rows_apart + s * 2 * kCoreK);
            }
            if constexpr (kProducts == 3) {
                load_matrices(tail[s], point_address(slot, k0, 1) + point_lane + s * 2 * kCoreK);
            }
        }
        const unsigned b_head = shared_address(stage(0, slot)) + anchor_lane;
        const unsigned b_tail = shared_address(stage(kSingle ? 0 : 1, slot)) + anchor_lane;
#pragma unroll
        for (int pair = 0; pair < kTile / 16; ++pair) {
            unsigned c_head[kSteps][4];
            unsigned c_tail[kSteps][4];
#pragma unroll
            for (int s = 0; s < kSteps; ++s) {
                const unsigned at = pair * 2 * kCoreRows + s * 2 * kCoreK;
                load_matrices(c_head[s], b_head + at);
                if constexpr (!kSingle) {
                    load_matrices(c_tail[s], b_tail + at);
                }
            }
#pragma unroll
            for (int j = 0; j < 2; ++j) {
                if constexpr (kSingle) {
#pragma unroll
                    for (int h = 0; h < kHalves; ++h) {
#pragma unroll
                        for (int s = 0; s < kSteps; ++s) {
                            mma_16x8x16<kType>(acc[h] + (2 * pair + j) * 4, head[h][s], c_head[s][2 * j],
                                               c_head[s][2 * j + 1]);
                        }
                    }
                } else {
                    float fresh[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
                    for (int s = 0; s < kSteps; ++s) {
                        if constexpr (kProducts == 3) {
                            mma_16x8x16<kType>(fresh, tail[s], c_head[s][2 * j], c_head[s][2 * j + 1]);
                        }
                        mma_16x8x16<kType>(fresh, head[0][s], c_tail[s][2 * j], c_tail[s][2 * j + 1]);
                        mma_16x8x16<kType>(fresh, head[0][s], c_head[s][2 * j], c_head[s][2 * j + 1]);
                    }
                    float* const block = acc[0] + (2 * pair + j) * 4;
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        block[e] = __fadd_rn(block[e], fresh[e]);
                    }
                }
            }
        }
    };
    auto multiply_chunk = [&](unsigned slot, int k0) {
        if constexpr (kEngine == TensorEngine::wgmma) {
            multiply_chunk_wgmma(slot, k0);
        } else {
            multiply_chunk_mma(slot, k0);
        }
    };

    const float norm_scale = -1.0f / a.scale;
    const int my_col = quad * 2;  // the thread's first column in a tile
    for (std::size_t col0 = tiles.begin * kTile; col0 < tiles.end * kTile; col0 += kTile) {
        const unsigned first = begin_step();
        const bool whole = col0 + kTile <= a.m;  // every tile but perhaps the last
        // Split products: the accumulators start at -||c||^2 2^(2 exponent - 1), so that the tensor
        // cores leave ||c||^2 - 2 x.c scaled by -1/a.scale (each chunk's products start fresh, so the
        // norm meets one rounding per chunk). Past the last anchor they start at -inf: +inf scaled
        // back, which no list takes. One product starts at zero and meets the norms of the heads
        // only at the end (+inf past the last anchor): an accumulator that started at the norm would
        // carry its magnitude through every step's rounding, and the window is built on sums of
        // |products| alone. Every thread has left the last epilogue, which read them, by now.
        if constexpr (kSingle) {
            if (tid < kTile) {
                epilogue_norms[tid] = whole || col0 + tid < a.m ? tile_norms[first][tid] : CUDART_INF_F;
            }
        }
#pragma unroll
        for (int j = 0; j < kAccumulators / 4; ++j) {
#pragma unroll
            for (int c = 0; c < 2; ++c) {
                const int col = my_col + j * 8 + c;
                const bool inside = whole || col0 + col < a.m;
                const float start = kSingle ? 0.0f : inside ? tile_norms[first][col] * norm_scale : -CUDART_INF_F;
#pragma unroll
                for (int h = 0; h < kHalves; ++h) {
                    acc[h][j * 4 + c] = start;
                    acc[h][j * 4 + 2 + c] = start;
                }
            }
        }
        multiply_chunk(first, 0);
        for (int chunk = 1; chunk < chunks; ++chunk) {
            multiply_chunk(begin_step(), chunk * kChunk);
        }
        if (kSingle && chunks == 1) {
            __syncthreads();  // the norms are in (with more chunks, the steps' barriers saw to it)
        }

#pragma unroll
        for (int h = 0; h < kHalves; ++h) {
#pragma unroll
            for (int e = 0; e < kAccumulators; ++e) {
                // One product: ||c||^2 - 2 x.c in place, +inf past the last anchor. Split products:
                // scaling by a power of two is exact; these are the values the lists keep.
                acc[h][e] = kSingle ? fmaf(-a.scale, acc[h][e], epilogue_norms[my_col + (e / 4) * 8 + e % 2])
                                    : acc[h][e] * -a.scale;
            }
        }
        const std::size_t first_col = col0 + my_col;
        if (!kSingle && a.exclude_self && col0 < row0 + kPoints && row0 < col0 + kTile) {
            // A point's own column (the points are the anchors) is +inf, which no list takes.
#pragma unroll
            for (int h = 0; h < kHalves; ++h) {
#pragma unroll
                for (int o = 0; o < kOwnedRows; ++o) {
                    const std::size_t row = row0 + row_of(h, o);
#pragma unroll
                    for (int e = 0; e < kOwnedValues; ++e) {
                        if (first_col + (e / 2) * 8 + e % 2 == row) {
                            acc[h][(e / 2) * 4 + o * 2 + e % 2] = CUDART_INF_F;
                        }
                    }
                }
            }
        }
        offer_fragments(acc, first_col, window, limit, row_bound, row_of, top);
    }
    wait_copies<0>();  // only empty groups are left; nothing may be in flight when the block exits

    // The four lanes of a group hold the same rows, each a quarter of the anchors.
#pragma unroll
    for (int h = 0; h < kHalves; ++h) {
#pragma unroll
        for (int o = 0; o < kOwnedRows; ++o) {
            merge_lanes(top[h][o], 2);
            store_row(a, blockIdx.y, row0 + row_of(h, o), top[h][o], quad);
        }
    }
}

template <TensorEngine kEngine, HalfType kType, int kProducts, bool kResident>
void launch_kernel(const HalfAssignArgs& a, cudaStream_t stream) {
    const auto kernel = fast_assign_half_kernel<kEngine, kType, kProducts, kResident>;
    const std::size_t bytes = shared_bytes(kEngine, kProducts, kResident, a.stride);
    const std::size_t needed = bytes + static_shared_bytes(kernel);
    if (kEngine == TensorEngine::mma_sync && needed > a.shared_limit) {
        throw Error("fast assign: the mma.sync kernel needs " + std::to_string(needed) +
                    " bytes of shared memory per block; this GPU gives " + std::to_string(a.shared_limit));
    }
    const dim3 tiles(static_cast<unsigned>(ceil_div(a.n, points_of(kEngine, kProducts))),
                     static_cast<unsigned>(a.splits));
    launch_kernel_ex(kernel, "fast_assign_half_kernel", tiles, kThreads, bytes, 1, stream, a);
}

// The block's points stay in shared memory when they are few enough (kResidentBytes), and on
// mma.sync when they fit beside the ring and the kernel's own arrays in what the GPU gives a block.
template <TensorEngine kEngine, HalfType kType, int kProducts>
void launch(const HalfAssignArgs& a, cudaStream_t stream) {
    const bool resident =
        resident_bytes(kEngine, kProducts, a.stride) <= kResidentBytes &&
        (kEngine == TensorEngine::wgmma ||
         shared_bytes(kEngine, kProducts, true, a.stride) +
                 static_shared_bytes(fast_assign_half_kernel<kEngine, kType, kProducts, true>) <=
             a.shared_limit);
    if (resident) {
        launch_kernel<kEngine, kType, kProducts, true>(a, stream);
    } else {
        launch_kernel<kEngine, kType, kProducts, false>(a, stream);
    }
}

template <TensorEngine kEngine>
void launch_engine(const HalfAssignArgs& a, cudaStream_t stream) {
    const bool f16 = a.type == HalfType::f16;
    switch (a.products) {
    case 1:
        if constexpr (kEngine == TensorEngine::wgmma) {
            return launch_fast_assign_single(a, stream);
        } else {
            return f16 ? launch<kEngine, HalfType::f16, 1>(a, stream) : launch<kEngine, HalfType::bf16, 1>(a, stream);
        }
    case 2:
        return f16 ? launch<kEngine, HalfType::f16, 2>(a, stream) : launch<kEngine, HalfType::bf16, 2>(a, stream);
    case 3:
        if (f16) {
            return launch<kEngine, HalfType::f16, 3>(a, stream);
        }
        break;
    }
    throw Error("fast assign: no half-precision kernel for " + std::to_string(a.products) + " products of " +
                (f16 ? "float16" : "bfloat16"));
}

}  // namespace

void launch_fast_assign_half(const HalfAssignArgs& a, cudaStream_t stream) {
    if (a.engine == TensorEngine::wgmma) {
        return launch_engine<TensorEngine::wgmma>(a, stream);
    }
    launch_engine<TensorEngine::mma_sync>(a, stream);
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
