// One sub-space's columns of the rotated residuals, as the points of a fit or an assign.
#pragma once

#include "vlattice/types.hpp"

#include <algorithm>

namespace vlattice {

// Columns [first, first + width) of `from`.
inline Matrix column_block(const Matrix& from, std::size_t first, std::size_t width) {
    Matrix block(from.rows, width);
    for (std::size_t i = 0; i < from.rows; ++i) {
        std::copy(from.row(i) + first, from.row(i) + first + width, block.row(i));
    }
    return block;
}

}  // namespace vlattice
