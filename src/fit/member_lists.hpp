// The points of each anchor, grouped: what the residual coder, the search and the recall need.
#pragma once

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

}  // namespace vlattice
