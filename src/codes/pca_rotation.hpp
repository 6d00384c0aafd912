// The PCA start of product-code training: the principal directions of the residuals, shared out
// among the sub-spaces so that each holds a like share of the variance.
#pragma once

#include "vlattice/types.hpp"

#include <cstdint>
#include <vector>

namespace vlattice {

struct SubspaceRotation {
    Matrix rotation;                      // p x d, orthonormal rows
    std::vector<std::uint32_t> bounds;    // M + 1 offsets into the rows
};

// The eigen-decomposition of the residuals' second moment: what every product code trained on the
// same residuals starts from, whatever its sub-spaces.
struct PrincipalDirections {
    std::size_t d = 0;
    std::vector<double> ascending;  // the d eigenvalues, ascending
    std::vector<double> vectors;    // d x d, row i the eigenvector of ascending[i]
};

PrincipalDirections principal_directions(const Matrix& residuals);

// Coded dimensions p: the directions whose eigenvalue exceeds 1e-10 of the largest, at most
// `most_dims` of them (the largest; 0: no limit), and at least `subspaces`. Their eigenvectors,
// grouped by sub-space (allocate_eigenvalues), are the rotation's rows. Requires
// 1 <= subspaces <= d.
SubspaceRotation pca_rotation(const PrincipalDirections& directions, std::size_t subspaces, std::size_t most_dims);

}  // namespace vlattice
