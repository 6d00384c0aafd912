// Rows of a stored type (vlattice/point_set.hpp) widened to float32 on the device: tiles are kept on
// the device or cross the bus in their own bytes, a quarter of float32's for uint8, and widen there.
#pragma once

#include "vlattice/point_set.hpp"

#include <cuda_runtime.h>

#include <cstddef>

namespace vlattice::cuda {

// count values of `type` at `stored` into `out` as float32; every stored value is exact in float32.
void launch_widen_stored(const void* stored, StoredType type, std::size_t count, float* out, cudaStream_t stream);

}  // namespace vlattice::cuda
