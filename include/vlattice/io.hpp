// Vector file readers and writers. The format is chosen by the file's extension:
//   .fvecs .bvecs .ivecs (TEXMEX)   .fbin .u8bin (big-ann)   .npy (float32, float16, uint8; C order)
//   .h5 .hdf5 (one dataset by name)
// Every reader checks the sizes its header promises against the file's length before it allocates,
// and every error names the file (and the row or field where there is one).
#pragma once

#include "vlattice/types.hpp"

#include <string>

namespace vlattice {

struct ReadOptions {
    std::string dataset = "train";  // HDF5 dataset path inside the file
};

// Reads the whole file as float32 rows (narrower element types are widened).
Matrix read_vectors(const std::string& path, const ReadOptions& options = {});

// Throws Error naming the file, the row and the column of the first NaN or Inf.
void check_finite(const Matrix& points, const std::string& path);

// Writes .fvecs or .npy (float32), chosen by extension, through AtomicFile.
void write_vectors(const std::string& path, const Matrix& points);

}  // namespace vlattice
