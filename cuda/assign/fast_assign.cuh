// The fast half of the exact assign: kernels that compute every point-anchor distance in float from
// ||x||^2 + ||c||^2 - 2 x.c, keep each point's Candidate instead of writing the n x m distances, and
// state how far their distances can be from exact. Two families: float32 FMAs, and tensor cores with
// 16-bit operands, one product (a window of the rows' rounding times the distance: single_window.cuh)
// or split operands (two or three products, a window as narrow as float32's, narrower at large d).
#pragma once

#include "assign/candidate.cuh"
#include "assign/single_window.cuh"
#include "math/half_operands.cuh"
#include "math/point_rows.cuh"

#include <cuda_runtime.h>

#include <cfloat>
#include <cstddef>

namespace vlattice::cuda {

// The kernels tile the anchors by this many rows, and the points by it or a multiple of it.
constexpr int kFastTile = 128;
// The single-product kernel's blocks take this many points, and keep them in shared memory when their
// 16-bit rows have at most kKeptRowValues values; longer rows stream once per anchor tile.
constexpr int kSinglePoints = 256;
constexpr int kKeptRowValues = 256;

enum class FastPath { fp32, half_single, half_split };

// The tensor cores' instruction the half paths run on: Hopper's warpgroup MMA (sm_90a only), or the
// warp-level mma.sync of every GPU since Ampere. Both round the same way per k-step of 16 products
// (half_rounding_factor), so they keep the same windows and give the same candidates' distances.
enum class TensorEngine { wgmma, mma_sync };

struct FastAssignArgs {
    PointRows points;  // in any stored type
    const float* anchors = nullptr;
    const float* anchor_norms = nullptr;
    std::size_t n = 0;
    std::size_t m = 0;
    int d = 0;
    bool exclude_self = false;  // point i may not take anchor i
    int splits = 1;             // blockIdx.y: one range of anchor tiles each
    int tiles_per_split = 1;
    Candidate* candidates = nullptr;  // splits * n
};

// The anchor tiles [begin, end) of a split (a block's blockIdx.y, or its pair's).
struct TileRange {
    std::size_t begin;
    std::size_t end;
};
__device__ __forceinline__ TileRange split_tiles(std::size_t m, int tiles_per_split, unsigned split) {
    const std::size_t tiles = (m + kFastTile - 1) / kFastTile;
    const std::size_t begin = static_cast<std::size_t>(split) * tiles_per_split;
    return {begin, begin + tiles_per_split < tiles ? begin + tiles_per_split : tiles};
}

void launch_fast_assign_fp32(const FastAssignArgs& args, cudaStream_t stream);

// Operands from launch_split_rows, all with the same type, exponent and stride.
struct HalfAssignArgs {
    HalfType type = HalfType::f16;
    int products = 1;  // 1, 2 (points exact in the type: no point tails) or 3 (float16 only)
    const std::uint16_t* point_head = nullptr;
    const std::uint16_t* point_tail = nullptr;   // 3 products
    const std::uint16_t* anchor_head = nullptr;
    const std::uint16_t* anchor_tail = nullptr;  // 2 and 3 products
    const float* point_norms = nullptr;
    // Padded with +inf to a multiple of kFastTile; for one product, the norms of the anchors' heads.
    const float* anchor_norms = nullptr;
    const unsigned* max_anchor_norm_bits = nullptr;
    // Two and three products: the repair's window for a row is at most window_factor (2 ||x||^2 + 2
    // max ||c||^2) + window_absolute; values beyond the row's best by more need not be kept. Zero
    // without a repair.
    float window_factor = 0.0f;
    float window_absolute = 0.0f;
    // One product: the window from the rows' own rounding, and the last assign's bound on each row.
    SingleWindowArgs single;
    PriorArgs prior;
    std::size_t n = 0;
    std::size_t m = 0;
    bool exclude_self = false;  // point i may not take anchor i (two and three products)
    int stride = 0;       // half_stride(d)
    float scale = 0.0f;   // 2^(1 - 2 exponent): turns a scaled dot product into 2 x.c, exactly
    int splits = 1;
    int tiles_per_split = 1;
    Candidate* candidates = nullptr;  // splits * n
    TensorEngine engine = TensorEngine::wgmma;
    // The device's shared memory per block (cudaDevAttrMaxSharedMemoryPerBlockOptin): mma_sync's
    // blocks keep their points in shared memory only where they fit beside the staging.
    std::size_t shared_limit = 0;
};
void launch_fast_assign_half(const HalfAssignArgs& args, cudaStream_t stream);

// What both half kernels do per point row: the repair's window for the row at its widest (zero
// past the last point), and at the end, once the row's lists of the four lanes of a fragment quad
// are merged (merge_lanes(top, 2)), the store of the split's Candidate.
__device__ __forceinline__ float row_window(const HalfAssignArgs& a, std::size_t row, float max_anchor_norm) {
    const float x_norm = row < a.n ? a.point_norms[row] : 0.0f;
    return a.window_factor * (2.0f * x_norm + 2.0f * max_anchor_norm) + a.window_absolute;
}
__device__ __forceinline__ void store_row(const HalfAssignArgs& a, unsigned split, std::size_t row,
                                          const Candidate& top, int quad) {
    if (quad == 0 && row < a.n) {
        a.candidates[static_cast<std::size_t>(split) * a.n + row] = top;
    }
}
// The single product's own kernel on wgmma (fast_assign_single.cu), which launch_fast_assign_half
// calls; on mma_sync the split kernel takes one product too.
void launch_fast_assign_single(const HalfAssignArgs& args, cudaStream_t stream);

// Bounds on |fast - exact| of any distance, relative to ||x||^2 + ||c||^2; the half kernels add an
// absolute term for values below their type's normal range.
//
// Float32: the dot product of length d is off by at most d*u*||x||*||c|| <= d*u*(||x||^2 + ||c||^2)/2
// for any summation order, and the rounded norms and the two additions add a few more units of u:
// exactly the bound of src/cpu/exact_assign.cpp. Product codes' encoder screens with it too.
__host__ __device__ inline float fp32_rounding_factor(int d) {
    return static_cast<float>(d + 8) * FLT_EPSILON * 0.5f;
}
float half_rounding_factor(HalfType type, int products, int d);
float half_absolute_bound(int d, int exponent);
// The single-product kernel's accumulation error on a dot product, relative to its sum of |products|.
float single_accumulation_factor(int d);

}  // namespace vlattice::cuda
