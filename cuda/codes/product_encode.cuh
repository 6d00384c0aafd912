// Product codes on the device (encode_product in include/vlattice/product_codes.hpp): the residuals
// rotated in the CPU's float order, then each sub-space's nearest centroid: a screen of fast float
// distances, and the candidates it leaves scored in double in the CPU's order, so the bytes equal
// encode_product_on_cpu's.
#pragma once

#include "vlattice/product_codes.hpp"

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

namespace vlattice::cuda {

// Streams the points through the device in tiles, two in flight (on `stream` and a second stream of
// its own), so that copying one tile in overlaps coding the other. Device memory: the anchors, the
// rotation, the centroids and the screen's padded copy of them once, plus per tile slot its points,
// assignments, rotated residuals and ids, about 128 MiB a slot.
std::vector<std::uint8_t> encode_product(const ProductCodebook& book, const Matrix& points, const Matrix& anchors,
                                         const std::vector<std::uint32_t>& assignments, cudaStream_t stream);

// rotate_rows (src/codes/rotation.hpp) on the device, the same bits, through tiles as above.
Matrix rotate_rows(const Matrix& rotation, const Matrix& rows, cudaStream_t stream);

}  // namespace vlattice::cuda
