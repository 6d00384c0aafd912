#include "fit/member_lists.hpp"

#include "vlattice/types.hpp"

#include <limits>
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

std::vector<Matrix> gather_member_rows(const PointView& points, const std::vector<std::uint32_t>& assignment,
                                       std::size_t m, const std::vector<std::uint32_t>& anchors, std::size_t limit) {
    constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();
    std::vector<std::uint32_t> slot_of(m, kNone);
    for (std::size_t t = 0; t < anchors.size(); ++t) {
        if (anchors[t] < m) {
            slot_of[anchors[t]] = static_cast<std::uint32_t>(t);
        }
    }
    std::vector<std::vector<std::size_t>> members(anchors.size());
    for (std::size_t i = 0; i < points.rows; ++i) {
        const std::uint32_t a = assignment[i];
        if (a < m && slot_of[a] != kNone && members[slot_of[a]].size() < limit) {
            members[slot_of[a]].push_back(i);
        }
    }
    std::vector<Matrix> out;
    out.reserve(anchors.size());
    for (const std::vector<std::size_t>& rows : members) {
        Matrix rows_of(rows.size(), points.cols);
        for (std::size_t r = 0; r < rows.size(); ++r) {
            points.widen_rows(rows[r], 1, rows_of.row(r));
        }
        out.push_back(std::move(rows_of));
    }
    return out;
}

}  // namespace vlattice
