// The centroids of every sub-space, each a fit() of the sub-space's rotated coordinates.
#pragma once

#include "vlattice/backend.hpp"
#include "vlattice/config.hpp"
#include "vlattice/types.hpp"

#include <cstdint>
#include <memory>
#include <vector>

namespace vlattice {

struct SubspaceCentroids {
    Matrix centroids;  // 2^bits x p, as ProductCodebook holds them
    Matrix decoded;    // n x p: every row's nearest centroids, the rows' codes decoded
};

// The backends the sub-space fits run on: `backend` alone, or up to backend.side_by_side() siblings
// of it, each made on first use and kept for every later call, so that its stream and buffers serve
// the fits of every OPQ round and stage instead of being made again for each.
class SubspaceFitters {
public:
    explicit SubspaceFitters(Backend& backend) : backend_(backend), siblings_(backend.side_by_side()) {}

    // How many fits run at once.
    std::size_t workers(std::size_t fits) const;
    // The backend of worker w < workers(); each is driven by one thread at a time.
    Backend& worker(std::size_t w);

private:
    Backend& backend_;
    std::vector<std::unique_ptr<Backend>> siblings_;
};

// Sub-space j's centroids are fit(kmeans) of columns [bounds[j], bounds[j + 1]) of `rotated` with
// min(2^bits, n) anchors and seed kmeans.seed + j. Rows left over when a fit drops empty anchors
// copy centroid 0, which the exact assign's ties to the lowest id never pick. A sub-space whose
// values all lie below the scale fit() accepts (accepted_range) holds no information: its
// centroids are zero. The fits run side by side on the fitters' workers, with the results they
// would give one after the other.
SubspaceCentroids train_subspace_centroids(const Matrix& rotated, const std::vector<std::uint32_t>& bounds,
                                           unsigned bits, const AnnealConfig& kmeans, SubspaceFitters& fitters);

}  // namespace vlattice
