#pragma once

#include "vlattice/backend.hpp"
#include "vlattice/point_set.hpp"
#include "vlattice/types.hpp"

#include <cstdint>
#include <vector>

namespace vlattice::cpu {

// Nearest anchor of every point. The fast float32 GEMM form ||x||^2 - 2 x.c + ||c||^2 picks the
// candidates; exact precision then re-scores in double every anchor whose fast distance lies within
// the worst-case rounding bound of the best, ties to the lowest index, while fast precision keeps the
// float32 argmin. distance[i] receives the double-scored squared distance to the chosen anchor. With
// `excluded`, point i may not take anchor excluded[i] (nearest other anchor; needs at least two
// anchors). Returns the number of points whose assignment changed.
//
// With `bounds` (exact precision), a point whose last anchor must still be its nearest keeps it
// without a scan (Hamerly's bounds): the scans up to kDirectDims dimensions leave a lower bound on
// the distance to every other anchor, and it holds while that bound, less the farthest move since,
// exceeds the distance to the last anchor plus that anchor's move; the points it cannot keep are
// scanned against the anchors near their last one (settle_by_neighbours in exact_assign.cpp).
// `assignment` and `distance` are then the last assign's. The result is the same as without.
struct AssignBounds {
    // Per anchor, how far it has moved since the last assign at most; +inf when it was replaced.
    const std::vector<double>* moved = nullptr;
    // Per point, a lower bound on the distance (not squared) to every anchor but its own; 0: none.
    std::vector<double>* others = nullptr;
};
std::size_t assign_nearest(const PointView& points, const std::vector<float>& point_norms, const Matrix& anchors,
                           AssignPrecision precision, std::vector<std::uint32_t>& assignment,
                           std::vector<double>& distance, const std::vector<std::uint32_t>* excluded = nullptr,
                           AssignBounds* bounds = nullptr);

// Each row's nearest other row (at least two rows): exact_assign of the rows to themselves, each
// barred from choosing itself.
NearestRows nearest_rows(const Matrix& rows);

}  // namespace vlattice::cpu
