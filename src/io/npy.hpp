// NumPy .npy files: versions 1.0, 2.0 and 3.0, C-order 2-D arrays of float32, float64 (narrowed
// to float32, refused beyond its range), float16, uint8 or int8.
#pragma once

#include "io/binary_file.hpp"
#include "io/elements.hpp"
#include "vlattice/io.hpp"
#include "vlattice/types.hpp"

#include <ostream>
#include <string>

namespace vlattice::io {

Matrix read_npy(const std::string& path, const ReadProgress& progress = {});

// The vectors' place in an open .npy file, its header and sizes checked (the errors read_npy gives).
ArrayLayout npy_layout(BinaryFile& file);

// Vector ids: int32, int64, uint32 or uint64 read exactly; the types read_npy reads when every value
// is a whole number.
IdMatrix read_npy_ids(const std::string& path);

// Writes a version 1.0 float32 file.
void write_npy(std::ostream& out, const Matrix& points);

}  // namespace vlattice::io
