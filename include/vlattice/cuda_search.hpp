// The GPU's decoder and search. Defined only in builds with VLATTICE_HAVE_CUDA: include and call them
// under that macro. Each makes `gpu` the calling thread's current device, throws Error when it cannot
// be used, and returns exactly what the CPU's reconstruct and search return, bit for bit.
#pragma once

#include "vlattice/format.hpp"
#include "vlattice/search.hpp"
#include "vlattice/types.hpp"

namespace vlattice {

Matrix reconstruct_cuda(const VlatFile& file, int gpu = 0);
Neighbors search_cuda(const VlatFile& file, const Matrix& queries, const SearchOptions& options, int gpu = 0);

}  // namespace vlattice
