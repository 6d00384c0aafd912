// Exact nearest-anchor assignment: a fast kernel (fast_assign.cuh: float32 FMAs or 16-bit tensor
// cores) keeps each point's kKeep smallest fast distances and the next one, and the points whose
// runner-up lies within the kernel's rounding bound of the best (worst-case, or for the single
// product from the rows' own rounding: single_window.cuh) are re-scored in double: against the kept
// anchors (a warp per point) when the next distance lies outside the bound, else against every
// anchor (a block per point). The result equals the argmin of the distances in
// double, ties to the lowest anchor, as on the CPU. Without the repair (AssignPrecision::fast) the
// fast kernel's argmin stands.
#pragma once

#include "assign/fast_assign.cuh"
#include "assign/single_window.cuh"
#include "math/point_rows.cuh"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace vlattice::cuda {

// What the plans need of the GPU.
struct GpuShape {
    int multiprocessors = 1;
    std::size_t l2_bytes = 0;
    std::size_t shared_limit = 0;  // shared memory a block may opt into
};
GpuShape gpu_shape(int gpu);

// The anchors are split over several blocks per point tile when there are few points, so that the
// GPU has enough blocks, and when rows are too long for the single-product kernel to keep (they
// stream once per anchor tile), so that the point rows of its blocks running at once fit in half of L2;
// each split leaves one Candidate per point.
struct AssignPlan {
    int splits = 1;
    int tiles_per_split = 1;
};
AssignPlan plan_assign(std::size_t n, std::size_t m, int d, const GpuShape& gpu);

// The 16-bit operands of the half paths, from launch_split_rows.
struct HalfOperands {
    HalfType type = HalfType::f16;
    int exponent = 0;
    const std::uint16_t* point_head = nullptr;
    const std::uint16_t* point_tail = nullptr;  // null when every point is exact in the type
    const std::uint16_t* anchor_head = nullptr;
    const std::uint16_t* anchor_tail = nullptr;
    const unsigned* anchor_flags = nullptr;     // kHalfOverflow: every point is re-scored against every anchor
    // The single product's window (single_window.cuh), from launch_head_norms: the anchors' head
    // norms (padded with +inf to a multiple of kFastTile) and the largest head norm and rounding,
    // the points' head norms and roundings.
    const float* anchor_head_norms = nullptr;
    const unsigned* anchor_head_maxima = nullptr;
    const float* point_head_norms = nullptr;
    const float* point_roundings = nullptr;
};

// n and m below 2^31 (ids are 32-bit on the device).
struct AssignArgs {
    PointRows points;  // in their stored type
    const float* point_norms = nullptr;
    const float* anchors = nullptr;
    const float* anchor_norms = nullptr;
    const unsigned* max_anchor_norm_bits = nullptr;
    std::size_t n = 0;
    std::size_t m = 0;
    int d = 0;
    // The points are the anchors themselves: point i may not take anchor i (nearest other anchor;
    // needs m >= 2).
    bool exclude_self = false;
    // The single product's bound from the last assign (single_window.cuh); null pointers: none.
    PriorArgs prior;
    // Which fast kernel, on which tensor-core instruction; with the repair the result is exact, only
    // the share of points re-scored differs.
    FastPath path = FastPath::fp32;
    TensorEngine engine = TensorEngine::wgmma;
    HalfOperands half;
    bool repair = true;
    AssignPlan plan;
    Candidate* candidates = nullptr;        // plan.splits * n
    std::uint32_t* chosen = nullptr;        // n: receives the exact argmin
    std::uint32_t* uncertain = nullptr;     // n: scratch lists of the points re-scored in double
    unsigned* uncertain_counts = nullptr;   // 2, zeroed by the caller: short-list and all-anchor re-scores
    GpuShape gpu;
};

// The assign in two steps, so that the caller may look at the counts in between: the fast kernel
// and the sorting of the points by how much repair they need (uncertain_counts: short list, all
// anchors; the caller zeroes them first); then the repair in double. Between the two the caller may
// narrow the all-anchor points (below), or run the first step again with a narrower path.
void launch_shortlist(const AssignArgs& args, cudaStream_t stream);
void launch_repair(const AssignArgs& args, cudaStream_t stream);

// Narrowing: after a single-product launch_shortlist, the points of the all-anchor list get a second
// fast pass of their own with split products (a window as narrow as float32's) and are sorted again;
// most then need a short list or nothing. A block re-scores an all-anchor point by reading every
// anchor, so a few thousand such points cost more than the split pass over just them.
// Worth it when the all-anchor re-score would read at least this many anchor values (64 MB, tens
// of microseconds of L2 reads on an H100; the narrowing's own launches cost about as much).
constexpr double kNarrowValues = double(1 << 24);
bool worth_narrowing(std::size_t all_anchor_points, std::size_t m, int d);

// The narrowing's scratch, for batches of `count` points out of an all-anchor list of `total`: the
// list (total ids), count ids and norms, count x half_stride(d) 16-bit rows of heads and (when the
// points have tails) tails, plan_assign(count, m).splits x count candidates.
struct NarrowBuffers {
    std::uint32_t* list = nullptr;
    std::uint32_t* ids = nullptr;
    float* norms = nullptr;
    std::uint16_t* point_head = nullptr;
    std::uint16_t* point_tail = nullptr;
    Candidate* candidates = nullptr;
};

// Narrows the entries [first, first + count) of the all-anchor list of `total` points
// (uncertain_counts[1], which the caller read), so that scratch for a batch serves any number of
// such points; launch_repair follows as usual. The batches go in order from first = 0, which copies
// the list aside and empties it for the narrowed points that still need every anchor.
void launch_narrow(const AssignArgs& args, std::size_t total, std::size_t first, std::size_t count,
                   const NarrowBuffers& scratch, cudaStream_t stream);

// Products per point-anchor pair of args.path's half-precision kernel.
int half_products(const AssignArgs& args);

}  // namespace vlattice::cuda
