// Vector ids (a ground truth's true neighbours) from files that store them as floating-point numbers.
#pragma once

#include "vlattice/types.hpp"

#include <string>

namespace vlattice::io {

// The values as ids, each a whole number >= 0; an Error naming `where`, the row and the column of the
// first that is not.
IdMatrix whole_ids(const Matrix& values, const std::string& where);

}  // namespace vlattice::io
