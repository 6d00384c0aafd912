// A rank's share of the rows of a fit, and the exchanges that give every rank what one process
// holding all the rows would compute: sums in the blocks of a deterministic sum (numeric.hpp),
// rows drawn from the whole set, the first members of anchors in row order.
#pragma once

#include "numeric.hpp"
#include "vlattice/collective.hpp"
#include "vlattice/point_set.hpp"
#include "vlattice/types.hpp"

#include <cstdint>
#include <cstring>
#include <vector>

namespace vlattice {

// deterministic_sum over the whole set of the terms this rank holds (term(i) for its rows i): the
// ranks' block sums, which start on the same rows as one process's, added in the same order.
template <class Term>
double shared_sum(const RowShare& share, std::size_t rows, Term term, std::size_t values_per_term = 1) {
    const std::vector<double> mine = block_sums(rows, term, values_per_term);
    if (share.ranks->size() == 1) {
        return ordered_total(mine);
    }
    std::vector<double> all((share.total_rows + kSumBlock - 1) / kSumBlock, 0.0);
    std::memcpy(all.data() + share.first_row / kSumBlock, mine.data(), mine.size() * sizeof(double));
    share_values(*share.ranks, all.data(), all.size());
    return ordered_total(all);
}

// Rows `rows` of the whole set (each below total_rows), in that order, widened to float32, on
// every rank; `points` are this rank's rows.
Matrix gather_rows(const RowShare& share, const PointView& points, const std::vector<std::size_t>& rows);

// gather_member_rows over the whole set: the first `limit` members in row order of each listed
// anchor, from the ranks in turn.
std::vector<Matrix> gather_shared_members(const RowShare& share, const PointView& points,
                                          const std::vector<std::uint32_t>& assignment, std::size_t m,
                                          const std::vector<std::uint32_t>& anchors, std::size_t limit);

}  // namespace vlattice
