// Turning a .vlat back into vectors, and measuring how far the result is from the original.
#pragma once

#include "vlattice/format.hpp"
#include "vlattice/point_set.hpp"
#include "vlattice/types.hpp"

#include <string>

namespace vlattice {

// Throws Error unless the file's parts fit together: anchors m x d, n assignments each < m, at most
// one kind of residual code, scalar codes (when present) with d widths, m x d offsets and steps,
// and n codes, product codes (when present) with a codebook that check_product_codebook accepts and
// n codes as a file stores them (check_product_code_bytes); and unless every value it decodes to is
// finite (check_decodes_finite). What every decoder (CPU or GPU) checks before it reads.
void check_compressed_set(const VlatFile& file);

// Throws Error naming the section, the anchor or row and the dimension or column unless every
// anchor component is finite and, with scalar codes, every code of every dimension decodes
// (decode_row) to a finite value, or, with product codes, the codebook passes
// check_product_codebook for anchors up to the largest anchor magnitude. Expects the anchors and
// the scalar codes to fit together.
void check_decodes_finite(const VlatFile& file);

// Row i is vector i's anchor plus its decoded residual (decode_row, or decode_product_row with
// product codes). Throws Error on an assignment outside the anchors. A model (n = 0) gives 0 rows.
Matrix reconstruct(const VlatFile& file);

// Mean over rows of the squared L2 distance between matching rows, accumulated in double; the same
// quantity as the annealing energy. Throws Error naming both shapes when they differ.
double mean_squared_error(const Matrix& a, const Matrix& b);

// mean_squared_error(reconstruct(file), points) without holding the reconstruction: a row at a time.
double reconstruction_mse(const VlatFile& file, const PointView& points);

// Names used on the command line, in `info` and in reports.
const char* anchor_storage_name(AnchorStorage storage);
// Throws Error naming the bad value.
AnchorStorage parse_anchor_storage(const std::string& name);
const char* codec_name(ResidualCodec codec);

}  // namespace vlattice
