// What the product codes of one budget share: the residual sample they train on and its principal
// directions. The candidates differ in their sub-spaces, widths and stages, not in these, so a
// budget computes them once (on the host, where the candidates would otherwise take turns at the
// same eigen-decomposition) and every candidate trains from them.
#pragma once

#include "codes/pca_rotation.hpp"
#include "vlattice/backend.hpp"
#include "vlattice/config.hpp"
#include "vlattice/product_codes.hpp"
#include "vlattice/stage_seconds.hpp"
#include "vlattice/types.hpp"

#include <cstdint>
#include <vector>

namespace vlattice {

struct ProductTraining {
    Matrix residuals;  // the seeded sample's residuals, in row order
    PrincipalDirections directions;
};

// The residuals of a sample of `sample` of the listed rows (increasing, each below points.rows;
// all of them when `sample` is 0 or at least their count), drawn with `seed` as
// train_product_codebook draws it, and their principal directions (stage pq.start).
ProductTraining product_training(const Matrix& points, const std::vector<std::uint32_t>& rows, const Matrix& anchors,
                                 const std::vector<std::uint32_t>& assignments, std::size_t sample,
                                 std::uint64_t seed, StageSeconds* seconds);

// train_product_codebook from a prepared sample: the same codebook as from the rows it was drawn
// from, with the same config's train_sample and seed.
ProductCodebook train_product_codebook(const ProductTraining& training, const ProductCodeConfig& config,
                                       Backend& backend, StageSeconds* seconds);

}  // namespace vlattice
