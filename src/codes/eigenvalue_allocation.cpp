// The eigenvalue allocation of the PCA start (codes/eigenvalue_allocation.hpp).
#include "codes/eigenvalue_allocation.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace vlattice {

std::vector<std::vector<std::size_t>> allocate_eigenvalues(const std::vector<double>& descending,
                                                           std::size_t subspaces) {
    const std::size_t count = descending.size();
    std::vector<std::vector<std::size_t>> directions(subspaces);
    // An empty sub-space holds no variance at all, so it takes a direction before any other: with the
    // empty product's log of 0 instead, which sub-spaces fill first would depend on the data's units.
    std::vector<double> log_product(subspaces, -std::numeric_limits<double>::infinity());
    for (std::size_t i = 0; i < count; ++i) {
        std::size_t best = subspaces;
        for (std::size_t j = 0; j < subspaces; ++j) {
            const std::size_t capacity = count / subspaces + (j < count % subspaces ? 1 : 0);
            if (directions[j].size() < capacity && (best == subspaces || log_product[j] < log_product[best])) {
                best = j;
            }
        }
        // Eigenvalues of directions without variance come out as rounding noise, maybe negative.
        const double logarithm = std::log(std::max(descending[i], std::numeric_limits<double>::min()));
        log_product[best] = directions[best].empty() ? logarithm : log_product[best] + logarithm;
        directions[best].push_back(i);
    }
    return directions;
}

}  // namespace vlattice
