#pragma once

#include "vlattice/collective.hpp"
#include "vlattice/backend.hpp"
#include "vlattice/types.hpp"

#include <cstdint>
#include <vector>

namespace vlattice::cpu {

// Trimmed mean per anchor in O(n d) over the rows of every rank: each rank holds `points`, rows
// first_row .. first_row + points.rows of the whole set, with their anchors and distances. A
// counting sort groups this rank's members by anchor; each anchor keeps its keep = count -
// floor(trim * count) members smallest by (distance, row) over all ranks (kept_members.hpp); the
// kept rows and distances are summed exactly on the anchor's grid (fit/exact_sums.hpp) and the
// integer sums added over the ranks. So every rank, and one process holding all the rows, gets
// the same bits. means is m x d (row j untouched when anchor j is empty); variance is that of the
// kept members about their mean; the counts are over all ranks.
void robust_reduce(const PointView& points, std::uint64_t first_row, const std::vector<std::uint32_t>& assignment,
                   const std::vector<double>& distance, const Matrix& anchors, double trim, Collective& ranks,
                   std::vector<double>& means, AnchorStats& stats);

}  // namespace vlattice::cpu
