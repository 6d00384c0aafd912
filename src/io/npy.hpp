// NumPy .npy files: versions 1.0, 2.0 and 3.0, C-order 2-D arrays of float32, float16 or uint8.
#pragma once

#include "vlattice/types.hpp"

#include <ostream>
#include <string>

namespace vlattice::io {

Matrix read_npy(const std::string& path);

// Writes a version 1.0 float32 file.
void write_npy(std::ostream& out, const Matrix& points);

}  // namespace vlattice::io
