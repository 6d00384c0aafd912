// The residuals x - c(a) that product codes code, and the precondition of every function forming them.
#pragma once

#include "vlattice/types.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace vlattice {

// Throws Error, starting with `caller`, unless the points and the anchors have the same dimension,
// there is one assignment per point and each names an anchor.
void check_residual_inputs(const Matrix& points, const Matrix& anchors, const std::vector<std::uint32_t>& assignments,
                           const std::string& caller);

// r = x_i - c(a(i)) in float, coordinate by coordinate: what the rotation rotates, in training and
// in encoding alike.
inline void residual_of(const Matrix& points, const Matrix& anchors, const std::vector<std::uint32_t>& assignments,
                        std::size_t i, float* r) {
    const float* x = points.row(i);
    const float* c = anchors.row(assignments[i]);
    for (std::size_t k = 0; k < points.cols; ++k) {
        r[k] = x[k] - c[k];
    }
}

}  // namespace vlattice
