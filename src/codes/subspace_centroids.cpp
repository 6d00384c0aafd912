// Training the sub-space centroids (codes/subspace_centroids.hpp).
#include "codes/subspace_centroids.hpp"

#include "vlattice/anneal.hpp"
#include "vlattice/point_format.hpp"

#include "codes/column_block.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <memory>
#include <numeric>
#include <string>

namespace vlattice {

namespace {

bool below_accepted_scale(const Matrix& values) {
    const double scale = accepted_range(values.cols).smallest_scale;
    return std::all_of(values.data.begin(), values.data.end(), [&](float v) { return std::abs(v) < scale; });
}

// Fits sub-space j and writes its centroids and its rows' decoded values into `out` (its own columns
// only).
void fit_subspace(const Matrix& rotated, const std::vector<std::uint32_t>& bounds, std::size_t j,
                  const AnnealConfig& kmeans, std::size_t table, Backend& backend, SubspaceCentroids& out) {
    const std::size_t first = bounds[j];
    const std::size_t width = bounds[j + 1] - first;
    const Matrix values = column_block(rotated, first, width);
    if (below_accepted_scale(values)) {
        return;
    }
    check_accepted_range(values, "the rotated residuals of sub-space " + std::to_string(j));
    AnnealConfig config = kmeans;
    config.anchors = std::min(table, rotated.rows);
    config.seed = kmeans.seed + j;
    const FitResult fitted = fit(values, config, backend);
    for (std::size_t c = 0; c < table; ++c) {
        const float* centroid = fitted.anchors.row(c < fitted.anchors.rows ? c : 0);
        std::copy(centroid, centroid + width, out.centroids.row(c) + first);
    }
    for (std::size_t i = 0; i < rotated.rows; ++i) {
        const float* centroid = fitted.anchors.row(fitted.assignments[i]);
        std::copy(centroid, centroid + width, out.decoded.row(i) + first);
    }
}

}  // namespace

std::size_t SubspaceFitters::workers(std::size_t fits) const {
    return std::max<std::size_t>(1, std::min(fits, siblings_.size()));
}

Backend& SubspaceFitters::worker(std::size_t w) {
    if (siblings_.size() <= 1) {
        return backend_;
    }
    std::unique_ptr<Backend>& sibling = siblings_.at(w);
    if (!sibling) {
        sibling = backend_.sibling();
    }
    return *sibling;
}

SubspaceCentroids train_subspace_centroids(const Matrix& rotated, const std::vector<std::uint32_t>& bounds,
                                           unsigned bits, const AnnealConfig& kmeans, SubspaceFitters& fitters) {
    const std::size_t table = std::size_t{1} << bits;
    const std::size_t subspaces = bounds.size() - 1;
    SubspaceCentroids out{Matrix(table, rotated.cols), Matrix(rotated.rows, rotated.cols)};
    // Sub-spaces of one width in a row: a worker's next fit then has the shape of its last, whose
    // buffers it keeps.
    std::vector<std::size_t> order(subspaces);
    std::iota(order.begin(), order.end(), std::size_t{0});
    const auto width = [&](std::size_t j) { return bounds[j + 1] - bounds[j]; };
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return width(a) < width(b); });
    const std::size_t workers = fitters.workers(subspaces);
    if (workers == 1) {
        for (const std::size_t j : order) {
            fit_subspace(rotated, bounds, j, kmeans, table, fitters.worker(0), out);
        }
    } else {
        // An exception may not leave the parallel loop: each sub-space keeps its own, and the first
        // sub-space's is rethrown after it.
        std::vector<std::exception_ptr> failures(subspaces);
#pragma omp parallel for schedule(dynamic, 1) num_threads(static_cast<int>(workers))
        for (std::size_t k = 0; k < subspaces; ++k) {
            const std::size_t j = order[k];
            try {
                fit_subspace(rotated, bounds, j, kmeans, table,
                             fitters.worker(static_cast<std::size_t>(omp_get_thread_num())), out);
            } catch (...) {
                failures[j] = std::current_exception();
            }
        }
        for (const std::exception_ptr& failure : failures) {
            if (failure) {
                std::rethrow_exception(failure);
            }
        }
    }
    return out;
}

}  // namespace vlattice
