#include "search/search_scores.hpp"

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

void scores_to_distances(Neighbors& found, Metric metric) {
    if (metric != Metric::ip) {
        return;
    }
    for (std::size_t e = 0; e < found.distances.size(); ++e) {
        found.distances[e] = found.ids[e] < 0 ? -std::numeric_limits<float>::infinity() : 0.0f - found.distances[e];
    }
}

}  // namespace vlattice
