// Reconstructing product-coded vectors on the device: decode_product_row
// (include/vlattice/product_codes.hpp), bit for bit.
#pragma once

#include "search/product_row.cuh"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace vlattice::cuda {

// out (count x d) <- the reconstructions of vectors first .. first + count - 1: anchors (m x d) plus
// the codes `codes` holds (DeviceProduct); a thread per value.
void launch_decode_product(const ProductView& codes, const float* anchors, int d, std::size_t first, std::size_t count,
                           float* out, cudaStream_t stream);

}  // namespace vlattice::cuda
