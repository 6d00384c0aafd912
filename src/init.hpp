#pragma once

#include "vlattice/types.hpp"

#include <cstdint>

namespace vlattice {

// k-means++ (D^2 sampling) over a seeded random sample of `sample_size` points (all points when
// sample_size >= n). Returns m anchors, each a copy of a data point. When every remaining sample
// point coincides with a chosen anchor (fewer distinct points than m), the rest are drawn uniformly.
Matrix kmeans_plus_plus(const Matrix& points, std::size_t m, std::size_t sample_size, std::uint64_t seed);

}  // namespace vlattice
