#include "search_scores.hpp"

namespace vlattice {

void scores_to_distances(Neighbors& found, Metric metric) {
    if (metric != Metric::ip) {
        return;
    }
    for (std::size_t e = 0; e < found.distances.size(); ++e) {
        found.distances[e] = found.ids[e] < 0 ? -std::numeric_limits<float>::infinity() : 0.0f - found.distances[e];
    }
}

}  // namespace vlattice
