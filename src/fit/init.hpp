#pragma once

#include "random.hpp"
#include "vlattice/collective.hpp"
#include "vlattice/point_set.hpp"
#include "vlattice/types.hpp"

#include <cstdint>
#include <vector>

namespace vlattice {

// The rows k-means++ runs on: all of them when size >= n, else `size` rows drawn without
// replacement (partial Fisher-Yates), in draw order.
std::vector<std::size_t> draw_sample(std::size_t n, std::size_t size, Random& random);

// k-means++ (D^2 sampling) over a seeded random sample of `sample_size` points (all points when
// sample_size >= n). Returns m anchors, each a copy of a data point. When every remaining sample
// point coincides with a chosen anchor (fewer distinct points than m), the rest are drawn uniformly.
// The result is that of plain D^2 sampling; the triangle inequality only skips distances that
// cannot lower a point's weight. Only the sample's rows are widened to float32.
Matrix kmeans_plus_plus(const PointView& points, std::size_t m, std::size_t sample_size, std::uint64_t seed);
// The same over the whole set of which `points` are this rank's share: every rank draws the same
// sample of the whole set, gathers its rows and gets one process's anchors.
Matrix kmeans_plus_plus(const RowShare& share, const PointView& points, std::size_t m, std::size_t sample_size,
                        std::uint64_t seed);

// kmeans_plus_plus's random draws made ahead, for a backend that runs the same D^2 sampling
// elsewhere: the sample, the first anchor's place in it, and the uniform that picks each later
// anchor (the target is uniform * total weight). They are kmeans_plus_plus's own draws as long as
// no round finds every weight zero; there it draws an index instead, and the backend must fall
// back to kmeans_plus_plus.
struct SeedingDraws {
    std::vector<std::size_t> sample;
    std::size_t first = 0;
    std::vector<double> uniforms;  // m - 1
};
SeedingDraws draw_seeding(std::size_t n, std::size_t m, std::size_t sample_size, std::uint64_t seed);

}  // namespace vlattice
