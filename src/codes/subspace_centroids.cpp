// Training the sub-space centroids (codes/subspace_centroids.hpp).
#include "codes/subspace_centroids.hpp"

#include "codes/column_block.hpp"
#include "vlattice/anneal.hpp"
#include "vlattice/point_format.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace vlattice {

namespace {

bool below_accepted_scale(const Matrix& values) {
    const double scale = accepted_range(values.cols).smallest_scale;
    return std::all_of(values.data.begin(), values.data.end(), [&](float v) { return std::abs(v) < scale; });
}

}  // namespace

SubspaceCentroids train_subspace_centroids(const Matrix& rotated, const std::vector<std::uint32_t>& bounds,
                                           unsigned bits, const AnnealConfig& kmeans, Backend& backend) {
    const std::size_t n = rotated.rows;
    const std::size_t p = rotated.cols;
    const std::size_t table = std::size_t{1} << bits;
    SubspaceCentroids out{Matrix(table, p), Matrix(n, p)};
    AnnealConfig config = kmeans;
    config.anchors = std::min(table, n);
    for (std::size_t j = 0; j + 1 < bounds.size(); ++j) {
        const std::size_t first = bounds[j];
        const std::size_t width = bounds[j + 1] - first;
        const Matrix values = column_block(rotated, first, width);
        if (below_accepted_scale(values)) {
            continue;
        }
        check_accepted_range(values, "the rotated residuals of sub-space " + std::to_string(j));
        config.seed = kmeans.seed + j;
        const FitResult fitted = fit(values, config, backend);
        for (std::size_t c = 0; c < table; ++c) {
            const float* centroid = fitted.anchors.row(c < fitted.anchors.rows ? c : 0);
            std::copy(centroid, centroid + width, out.centroids.row(c) + first);
        }
        for (std::size_t i = 0; i < n; ++i) {
            const float* centroid = fitted.anchors.row(fitted.assignments[i]);
            std::copy(centroid, centroid + width, out.decoded.row(i) + first);
        }
    }
    return out;
}

}  // namespace vlattice
