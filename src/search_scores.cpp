#include "search_scores.hpp"

#include "numeric.hpp"

#include <algorithm>

namespace vlattice {

float exact_score(const float* query, const float* row, std::size_t d, Metric metric) {
    return metric == Metric::ip ? inner_product_score(ordered_dot(query, row, d))
                                : static_cast<float>(ordered_squared_distance(query, row, d));
}

void keep_smallest(std::vector<Scored>& scored, std::size_t keep) {
    if (keep >= scored.size()) {
        // partial_sort would heap-sort the lot, at about twice the cost.
        std::sort(scored.begin(), scored.end());
        return;
    }
    std::partial_sort(scored.begin(), scored.begin() + static_cast<std::ptrdiff_t>(keep), scored.end());
    scored.resize(keep);
}

namespace {

// Anchors scored at once by probe_anchors, and anchors per tile: 64 rows of 784 floats take 200 KB,
// which stay in a core's L2 while the block's queries score them.
constexpr std::size_t kProbeRows = 4;
constexpr std::size_t kProbeTile = 64;

// scores[r] <- exact_score of anchor first + r, for r < kProbeRows, the same bits: each anchor's
// lanes and tree are its own, and the anchors side by side keep the vector unit busy where one
// anchor's chain of additions left it waiting.
VLATTICE_ALSO_FOR_X86_64_V3_V4
void score_anchors(const float* query, const Matrix& anchors, std::size_t first, Metric metric, float* scores) {
    const float* rows[kProbeRows];
    for (std::size_t r = 0; r < kProbeRows; ++r) {
        rows[r] = anchors.row(first + r);
    }
    if (metric == Metric::ip) {
        ordered_lane_sums<kProbeRows>(query, rows, anchors.cols, product_term, scores);
        for (std::size_t r = 0; r < kProbeRows; ++r) {
            scores[r] = inner_product_score(scores[r]);
        }
        return;
    }
    ordered_lane_sums<kProbeRows>(query, rows, anchors.cols, squared_difference_term, scores);
}

}  // namespace

void probe_anchors(const Matrix& queries, std::size_t first, std::size_t count, const Matrix& anchors, Metric metric,
                   std::size_t nprobe, std::vector<Scored>* probes) {
    const std::size_t m = anchors.rows;
    for (std::size_t i = 0; i < count; ++i) {
        probes[i].resize(m);
    }
    float scores[kProbeRows];
    for (std::size_t tile = 0; tile < m; tile += kProbeTile) {
        const std::size_t end = std::min(m, tile + kProbeTile);
        for (std::size_t i = 0; i < count; ++i) {
            const float* query = queries.row(first + i);
            std::vector<Scored>& scored = probes[i];
            std::size_t j = tile;
            for (; j + kProbeRows <= end; j += kProbeRows) {
                score_anchors(query, anchors, j, metric, scores);
                for (std::size_t r = 0; r < kProbeRows; ++r) {
                    scored[j + r] = {scores[r], static_cast<std::uint32_t>(j + r)};
                }
            }
            for (; j < end; ++j) {
                scored[j] = {exact_score(query, anchors.row(j), anchors.cols, metric), static_cast<std::uint32_t>(j)};
            }
        }
    }
    for (std::size_t i = 0; i < count; ++i) {
        keep_smallest(probes[i], nprobe);
    }
}

void scores_to_distances(Neighbors& found, Metric metric) {
    if (metric != Metric::ip) {
        return;
    }
    for (std::size_t e = 0; e < found.distances.size(); ++e) {
        found.distances[e] = found.ids[e] < 0 ? -std::numeric_limits<float>::infinity() : 0.0f - found.distances[e];
    }
}

}  // namespace vlattice
