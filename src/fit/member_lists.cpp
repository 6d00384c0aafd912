#include "fit/member_lists.hpp"

#include "vlattice/types.hpp"

#include <numeric>
#include <string>

namespace vlattice {

MemberLists member_lists(const std::vector<std::uint32_t>& assignments, std::size_t m) {
    MemberLists lists;
    lists.start.assign(m + 1, 0);
    for (std::size_t i = 0; i < assignments.size(); ++i) {
        if (assignments[i] >= m) {
            throw Error("vector " + std::to_string(i) + " is assigned to anchor " + std::to_string(assignments[i]) +
                        ", but there are " + std::to_string(m) + " anchors");
        }
        ++lists.start[assignments[i] + 1];
    }
    std::partial_sum(lists.start.begin(), lists.start.end(), lists.start.begin());
    lists.members.resize(assignments.size());
    std::vector<std::size_t> next(lists.start.begin(), lists.start.end() - 1);
    for (std::size_t i = 0; i < assignments.size(); ++i) {
        lists.members[next[assignments[i]]++] = static_cast<std::uint32_t>(i);
    }
    return lists;
}

}  // namespace vlattice
