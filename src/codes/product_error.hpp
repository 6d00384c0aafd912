// The mean squared error of a product code, computed where the codes live.
#pragma once

#include "vlattice/backend.hpp"
#include "vlattice/product_codes.hpp"
#include "vlattice/types.hpp"

#include <cstdint>
#include <vector>

namespace vlattice {

// The mean over the points of the squared distance between each residual and its decoded code,
// `points` coded against their anchors with `book` on `backend`: each residual's rotated coordinates
// against the values its code decodes to (code_values), plus the energy its rotation leaves uncoded
// (none when p = d, up to rounding). Decoding back through R^T, p d per vector, gives the same error
// up to float rounding at the cost of the rotation again. The same on any number of threads.
double product_mse(const ProductCodebook& book, const Matrix& points, const Matrix& anchors,
                   const std::vector<std::uint32_t>& assignments, Backend& backend);

}  // namespace vlattice
