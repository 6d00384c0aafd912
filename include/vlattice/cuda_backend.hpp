#pragma once

#include "vlattice/backend.hpp"

#include <memory>

namespace vlattice {

// The CUDA backend on GPU `gpu`: everything of size n stays on the device for the whole run, and
// every kernel and copy runs on the backend's own stream. Its results equal the CPU backend's
// (assignments exactly, sums to rounding). Defined only in builds with VLATTICE_HAVE_CUDA, so include
// and call it under that macro. Throws Error when the GPU cannot be used. Its methods make `gpu` the
// calling thread's current CUDA device.
//
// The fast half of its exact assign runs on tensor cores with half-precision operands (float16, or
// bfloat16 under bf16 storage): one product per point-anchor pair (`single`), unless too many points
// then need every anchor re-scored; then it moves to split operands (`split`: two or three products,
// a window of uncertainty as narrow as float32's) for the rest of the run (`automatic`). The other
// settings pin one kernel, for tests and measurements; the assignments are the same.
enum class FastKernel { automatic, single, split };
std::unique_ptr<Backend> make_cuda_backend(int gpu = 0, FastKernel kernel = FastKernel::automatic);

}  // namespace vlattice
