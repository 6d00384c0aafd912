// Exact nearest-anchor assignment: a fast kernel (fast_assign.cuh: float32 FMAs or tf32 tensor
// cores) keeps each point's kKeep smallest fast distances and the next one, and the points whose
// runner-up lies within the kernel's worst-case rounding bound of the best are re-scored in double:
// against the kept anchors within the bound (a warp per point) when the next distance lies outside
// it, else against every anchor (a block per point). The result equals the argmin of the distances in double, ties to
// the lowest anchor, as on the CPU.
#pragma once

#include "fast_assign.cuh"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace vlattice::cuda {

// When there are few points, the anchors are split over several blocks per point tile, so that the
// GPU has enough blocks; each split leaves one Candidate per point.
struct AssignPlan {
    int splits = 1;
    int tiles_per_split = 1;
};
AssignPlan plan_assign(std::size_t n, std::size_t m, int multiprocessors);

// n and m below 2^31 (ids are 32-bit on the device).
struct AssignArgs {
    const float* points = nullptr;
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
    // Which fast kernel; either way the result is exact, only the share of points re-scored differs.
    FastPath path = FastPath::fp32;
    AssignPlan plan;
    Candidate* candidates = nullptr;        // plan.splits * n
    std::uint32_t* chosen = nullptr;        // n: receives the exact argmin
    std::uint32_t* uncertain = nullptr;     // n: scratch lists of the points re-scored in double
    unsigned* uncertain_counts = nullptr;   // 2, zeroed by the caller: short-list and all-anchor re-scores
    int multiprocessors = 1;
};

void launch_exact_assign(const AssignArgs& args, cudaStream_t stream);

}  // namespace vlattice::cuda
