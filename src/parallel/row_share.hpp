// Rows that the ranks of a fit exchange so that every rank gets what one process holding all the
// rows would: rows drawn from the whole set, the first members of anchors in row order (the sums
// are shared_sum.hpp's).
#pragma once

#include "vlattice/collective.hpp"
#include "vlattice/point_set.hpp"
#include "vlattice/types.hpp"

#include <cstdint>
#include <vector>

namespace vlattice {

// Rows `rows` of the whole set (each below total_rows), in that order, widened to float32, on
// every rank; `points` are this rank's rows.
Matrix gather_rows(const RowShare& share, const PointView& points, const std::vector<std::size_t>& rows);

// gather_member_rows over the whole set: the first `limit` members in row order of each listed
// anchor, from the ranks in turn.
std::vector<Matrix> gather_shared_members(const RowShare& share, const PointView& points,
                                          const std::vector<std::uint32_t>& assignment, std::size_t m,
                                          const std::vector<std::uint32_t>& anchors, std::size_t limit);

}  // namespace vlattice
