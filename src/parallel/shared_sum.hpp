// A sum over the rows of every rank, the bits of one process holding all the rows: the blocks of a
// deterministic sum (numeric.hpp) start on the same rows on every split (rank_rows).
#pragma once

#include "numeric.hpp"
#include "vlattice/collective.hpp"

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

}  // namespace vlattice
