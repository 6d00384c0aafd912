// Turning a .vlat back into vectors, and measuring how far the result is from the original.
#pragma once

#include "vlattice/format.hpp"
#include "vlattice/types.hpp"

#include <string>

namespace vlattice {

// Row i is the anchor of vector i. Throws Error on an assignment outside the anchors.
Matrix reconstruct(const VlatFile& file);

// Mean over rows of the squared L2 distance between matching rows, accumulated in double; the same
// quantity as the annealing energy. Throws Error naming both shapes when they differ.
double mean_squared_error(const Matrix& a, const Matrix& b);

// Names used on the command line, in `info` and in reports.
const char* anchor_storage_name(AnchorStorage storage);
// Throws Error naming the bad value.
AnchorStorage parse_anchor_storage(const std::string& name);
const char* codec_name(ResidualCodec codec);

}  // namespace vlattice
