// The centroids of every sub-space, each a fit() of the sub-space's rotated coordinates.
#pragma once

#include "vlattice/backend.hpp"
#include "vlattice/config.hpp"
#include "vlattice/types.hpp"

#include <cstdint>
#include <vector>

namespace vlattice {

struct SubspaceCentroids {
    Matrix centroids;  // 2^bits x p, as ProductCodebook holds them
    Matrix decoded;    // n x p: every row's nearest centroids, the rows' codes decoded
    double error = 0.0;  // mean over the rows of the squared distance to `decoded`: the fits' energies summed
};

// Sub-space j's centroids are fit(kmeans) of columns [bounds[j], bounds[j + 1]) of `rotated` with
// min(2^bits, n) anchors and seed kmeans.seed + j. Rows left over when a fit drops empty anchors
// copy centroid 0, which the exact assign's ties to the lowest id never pick. A sub-space whose
// values all lie below the scale fit() accepts (accepted_range) holds no information: its
// centroids are zero. The fits run side by side on backend.side_by_side() siblings, with the results
// they would give one after the other.
SubspaceCentroids train_subspace_centroids(const Matrix& rotated, const std::vector<std::uint32_t>& bounds,
                                           unsigned bits, const AnnealConfig& kmeans, Backend& backend);

}  // namespace vlattice
