// The points of each anchor, grouped: what the residual coder, the search and the recall need.
#pragma once

#include "vlattice/point_set.hpp"
#include "vlattice/types.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace vlattice {

// members[start[j] .. start[j + 1]) are anchor j's points, in increasing index order.
struct MemberLists {
    std::vector<std::size_t> start;       // m + 1 entries
    std::vector<std::uint32_t> members;   // n entries
};

// A counting sort of the assignments; throws Error naming the first assignment >= m.
MemberLists member_lists(const std::vector<std::uint32_t>& assignments, std::size_t m);

// Backend::gather_members over points held on the host: for each listed anchor (distinct ids below
// m, or past them: no members), the rows of its first `limit` members by point index, as float32.
std::vector<Matrix> gather_member_rows(const PointView& points, const std::vector<std::uint32_t>& assignment,
                                       std::size_t m, const std::vector<std::uint32_t>& anchors, std::size_t limit);

}  // namespace vlattice
