// The probe of a search (include/vlattice/search.hpp): each query's nprobe best anchors by (score,
// anchor id), the score exact_score's (src/search/search_scores.hpp), as the GPU's probe ranks them.
#pragma once

#include "search/search_scores.hpp"
#include "vlattice/types.hpp"

#include <cstddef>
#include <vector>

namespace vlattice {

// Scoring every anchor exactly costs a search about as much as its scans at small nprobe: below every
// anchor the probe first takes each block's inner products in one float GEMM, whose worst-case
// rounding (for any order of its sums) and that of the exact score bound every exact score from both
// sides. Only the anchors whose lower bound reaches the nprobe-th smallest upper bound are scored
// exactly: every anchor of the nprobe best is among them, so the result is the one of scoring all.
class AnchorProbe {
public:
    AnchorProbe(const Matrix& anchors, Metric metric);

    // probes[i] <- the nprobe best anchors for query first + i of `queries`, for i < count, best
    // first, each with its exact_score; blocks of queries in parallel (OpenMP).
    void probe(const Matrix& queries, std::size_t first, std::size_t count, std::size_t nprobe,
               std::vector<std::vector<Scored>>& probes) const;

private:
    // probe() for one block of queries, into probes[0..count): one GEMM packs the anchors for all of it.
    void probe_block(const Matrix& queries, std::size_t first, std::size_t count, std::size_t nprobe,
                     std::vector<Scored>* probes) const;
    // Every anchor scored exactly, kProbeRows at a time, a tile of them for up to kProbeQueries queries.
    void score_all(const Matrix& queries, std::size_t first, std::size_t count, std::size_t nprobe,
                   std::vector<Scored>* probes) const;
    // Query `query`'s nprobe best from its inner products with every anchor (`dots`, m floats).
    void from_bounds(const float* query, const float* dots, std::size_t nprobe, std::vector<Scored>& scored) const;

    const Matrix& anchors_;
    Metric metric_;
    std::vector<double> norms_;  // each anchor's squared norm
    std::vector<double> roots_;  // and its square root
};

}  // namespace vlattice
