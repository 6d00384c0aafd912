// The rotation step of OPQ: the orthogonal Procrustes problem.
#pragma once

#include "vlattice/types.hpp"

namespace vlattice {

// The p x d rotation R with orthonormal rows that minimises the reconstruction error
// sum_i ||r_i - R^T zhat_i||^2 over the rows zhat_i of `decoded` (n x p) and r_i of `residuals`
// (n x d), p <= d: R = U V^T from the SVD U S V^T of A = decoded^T residuals, summed in double.
// With p = d it also minimises sum_i ||zhat_i - R r_i||^2.
Matrix procrustes_rotation(const Matrix& decoded, const Matrix& residuals);

}  // namespace vlattice
