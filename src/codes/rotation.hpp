// Rotating rows by a product code's rotation in the order product_codes.hpp fixes, for training,
// where the residuals are already at hand.
#pragma once

#include "vlattice/types.hpp"

namespace vlattice {

// z = R r for every row r of `residuals` (rotation p x d, residuals n x d): n x p, each z[t] summed
// over k = 0, 1, ..., d - 1 in float from +0, the bits rotate_residuals gives for the same residuals.
Matrix rotate_rows(const Matrix& rotation, const Matrix& residuals);

}  // namespace vlattice
