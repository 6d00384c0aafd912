// What the CPU and the GPU search (src/search/search.cpp, cuda/search/search.cu) rank by: a score, smallest first,
// ties to the lowest id. For l2 and angular it is the squared L2 distance and is reported as it is;
// for ip it is the negated inner product, turned back into the inner product when reported.
#pragma once

#include "vlattice/search.hpp"
#include "vlattice/types.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace vlattice {

using Scored = std::pair<float, std::uint32_t>;  // (score, id): the order is the contract's

// The ip score of an ordered_dot: 0 - dot rather than -dot, so that a zero scores +0 whatever the
// sign of the product's zero: the GPU orders scores by their bits (where -0 comes before +0) and the
// CPU by value (where they tie), so no score may come in both signs of zero. NaN, a product whose
// lanes overflowed to both infinities, scores +infinity (last), as neither sort would order NaN as
// the other does.
inline float inner_product_score(float dot) {
    return std::isnan(dot) ? std::numeric_limits<float>::infinity() : 0.0f - dot;
}

// The score of `row` (the query's anchor or a reconstruction) for a file of `metric`:
// ordered_squared_distance, or inner_product_score of ordered_dot (src/numeric.hpp).
float exact_score(const float* query, const float* row, std::size_t d, Metric metric);

// The asymmetric score of a product-coded vector (search.hpp) from its anchor's probe score, its e
// (l2 and angular) and its table sum S. The l2 sum may round below the exact 0 of a query on its
// own reconstruction: it is clamped to +0, never -0, for the reason inner_product_score gives.
inline float adc_l2_score(float probe, float extra, float sum) {
    const float x = (probe + extra) - (sum + sum);
    return x > 0.0f ? x : std::isnan(x) ? std::numeric_limits<float>::infinity() : 0.0f;
}
inline float adc_ip_score(float probe, float sum) {
    return inner_product_score((0.0f - probe) + sum);
}

// The `keep` smallest, sorted.
void keep_smallest(std::vector<Scored>& scored, std::size_t keep);

// found.distances holds the scores the search ranked by (+infinity where ids is -1); for ip, each
// becomes the inner product 0 - score, and a missing neighbour's -infinity (the least product).
void scores_to_distances(Neighbors& found, Metric metric);

}  // namespace vlattice
