#pragma once

#include "vlattice/backend.hpp"
#include "vlattice/types.hpp"

#include <cstdint>
#include <vector>

namespace vlattice::cpu {

// Trimmed mean per anchor in O(n d): a counting sort groups the points by anchor, a selection
// (nth_element on (distance, index)) finds each anchor's floor(trim * count) farthest members, and
// the rest are summed in double. means is m x d (row j untouched when anchor j is empty);
// variance is that of the kept members about their mean.
void robust_reduce(const PointView& points, const std::vector<std::uint32_t>& assignment,
                   const std::vector<double>& distance, const Matrix& anchors, double trim,
                   std::vector<double>& means, AnchorStats& stats);

}  // namespace vlattice::cpu
