// big-ann-benchmarks vector files (.fbin .u8bin .i8bin): uint32 n, uint32 d, then n * d float32,
// uint8 or int8 values, row-major.
#pragma once

#include "io/binary_file.hpp"
#include "io/elements.hpp"
#include "vlattice/io.hpp"
#include "vlattice/types.hpp"

#include <ostream>
#include <string>

namespace vlattice::io {

Matrix read_fbin(const std::string& path, const ReadProgress& progress = {});
Matrix read_u8bin(const std::string& path, const ReadProgress& progress = {});
Matrix read_i8bin(const std::string& path, const ReadProgress& progress = {});

// The vectors' place in an open big-ann file of `type`, its header and size checked (the errors
// the readers give).
ArrayLayout bigann_layout(BinaryFile& file, ElementType type);

// Writes float32 .fbin; `name` names the output in the Error for a shape that does not fit the header.
void write_fbin(std::ostream& out, const std::string& name, const Matrix& points);

}  // namespace vlattice::io
