// TEXMEX vector files (.fvecs .bvecs .ivecs): each row is an int32 dimension followed by that many
// float32, uint8 or int32 values.
#pragma once

#include "io/binary_file.hpp"
#include "io/elements.hpp"
#include "vlattice/io.hpp"
#include "vlattice/types.hpp"

#include <ostream>
#include <string>

namespace vlattice::io {

Matrix read_fvecs(const std::string& path, const ReadProgress& progress = {});
Matrix read_bvecs(const std::string& path, const ReadProgress& progress = {});
Matrix read_ivecs(const std::string& path, const ReadProgress& progress = {});
// An .ivecs file of vector ids (a ground truth), read exactly.
IdMatrix read_ivecs_ids(const std::string& path);

// The vectors' place in an open TEXMEX file of `type` (row 0's dimension, the length a whole number
// of rows; the errors the readers give).
ArrayLayout texmex_layout(BinaryFile& file, ElementType type);

// `name` names the output in the Error for a dimension that does not fit a row header.
void write_fvecs(std::ostream& out, const std::string& name, const Matrix& points);

}  // namespace vlattice::io
