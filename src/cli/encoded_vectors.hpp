// The .vlat input of the commands that decode or search its vectors (decompress, query).
#pragma once

#include "vlattice/format.hpp"

#include <string>

namespace vlattice::cli {

// read_vlat as the step "reading PATH". A model (n = 0: anchors and codebook, no vectors) is an
// Error saying so, rather than an empty output or a search over nothing.
VlatFile read_encoded_vectors(const std::string& path);

}  // namespace vlattice::cli
