// The codes a budget allows: the scalar code's bytes and the shapes of the product and residual codes
// that fit a budget of code bytes per vector or of the whole file (include/vlattice/coding_plan.hpp).
#pragma once

#include "vlattice/coding_plan.hpp"
#include "vlattice/format.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace vlattice {

// A product or residual code: b bits, M sub-spaces, S stages, over p rotated dimensions (0: all),
// sized for a whole-file budget with dims_per_subspace rotated dimensions per sub-space (0: all d).
struct ProductShape {
    unsigned bits = 8;
    std::size_t subspaces = 1;
    std::size_t stages = 1;
    std::size_t rotated_dims = 0;
    std::size_t dims_per_subspace = 0;

    CandidateKind kind() const { return {ResidualCodec::product, bits, dims_per_subspace}; }
    // The same code, whatever kind it was sized as.
    bool same_code(const ProductShape& other) const {
        return bits == other.bits && subspaces == other.subspaces && stages == other.stages &&
               rotated_dims == other.rotated_dims;
    }
};

// "pq M = 30 x 8 bits", "pq M = 41 x 8 bits over 82 dims", "rq S = 12 x 8 bits".
std::string product_description(const ProductShape& shape);

// The candidates of one budget.
struct BudgetShapes {
    std::size_t scalar_bytes = 0;  // whole code bytes of the scalar candidate; 0: no scalar candidate
    std::vector<ProductShape> product;
    bool ids_only = false;  // the ids alone (whole-file budgets)
};

// What spec's budget (budget_bytes or file_budget) allows n vectors of d dimensions with m anchors,
// for the families spec.family admits. Under a whole-file budget every shape's file, with the
// metadata at what the budget sets aside, fits floor(bytes_per_vector x n) bytes.
BudgetShapes budget_shapes(const CodingSpec& spec, std::size_t n, std::size_t m, std::size_t d);

// The shape of the file of n vectors, d dimensions and m anchors, without residual codes, under a
// whole-file budget (its anchor storage, its metadata allowance).
VlatShape budget_file_shape(const FileBudget& budget, std::size_t n, std::size_t m, std::size_t d);

}  // namespace vlattice
