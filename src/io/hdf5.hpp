// One 2-D numeric dataset of an HDF5 file (the ann-benchmarks layout keeps vectors in "train" and
// "test"), converted to float32 by libhdf5 whatever its stored type.
#pragma once

#include "vlattice/io.hpp"
#include "vlattice/types.hpp"

#include <string>

namespace vlattice::io {

Matrix read_hdf5(const std::string& path, const std::string& dataset, const ReadProgress& progress = {});

// Vector ids: an integer dataset read exactly, a floating-point one when its values are whole numbers.
IdMatrix read_hdf5_ids(const std::string& path, const std::string& dataset);

bool has_hdf5_dataset(const std::string& path, const std::string& dataset);

// The file's text attribute `name` ("" when it has none); throws Error when it is not text.
std::string read_hdf5_text_attribute(const std::string& path, const std::string& name);

}  // namespace vlattice::io
