#pragma once

#include "vlattice/backend.hpp"

#include <memory>

namespace vlattice {

// BLAS GEMM in blocks for the distances, OpenMP for everything per point and per anchor.
// threads = 0 uses every core.
std::unique_ptr<Backend> make_cpu_backend(int threads = 0);

}  // namespace vlattice
