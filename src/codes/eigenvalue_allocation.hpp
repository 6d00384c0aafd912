// Which principal directions go to which sub-space, so that the sub-spaces share the variance.
#pragma once

#include <cstddef>
#include <vector>

namespace vlattice {

// The OPQ paper's eigenvalue allocation (Ge et al., 2013): the directions, given by their
// eigenvalues in descending order, each go to the sub-space, among those not yet full, whose
// eigenvalues so far have the smallest product (the lowest such sub-space on ties). The first
// count % M sub-spaces hold one direction more than the others. Returns the directions of each
// sub-space in the order they were given. Requires 1 <= subspaces <= descending.size().
std::vector<std::vector<std::size_t>> allocate_eigenvalues(const std::vector<double>& descending,
                                                           std::size_t subspaces);

}  // namespace vlattice
