// A file's anchors and product codes uploaded once, for the decoder: anchors m x d, rotation p x d,
// centroids 2^b x p, sub-space bounds, and n codes. Footprint: 4 (m d + p d + 2^b p + M + 1) + n C
// bytes, C the code bytes per vector.
#pragma once

#include "device_buffer.hpp"

#include "vlattice/product_codes.hpp"
#include "vlattice/types.hpp"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace vlattice::cuda {

struct ProductView {
    const float* anchors = nullptr;
    const float* rotation = nullptr;
    const float* centroids = nullptr;
    const std::uint32_t* bounds = nullptr;
    const std::uint8_t* codes = nullptr;
    int d = 0;
    int p = 0;
    int subspaces = 0;
    int bits = 8;
    int code_bytes = 0;
};

class DeviceProductCodes {
public:
    // The caller has checked the codes against the file (check_compressed_set).
    DeviceProductCodes(const Matrix& anchors, const ProductCodes& codes, cudaStream_t stream);

    const ProductView& view() const { return view_; }

private:
    DeviceBuffer<float> anchors_;
    DeviceBuffer<float> rotation_;
    DeviceBuffer<float> centroids_;
    DeviceBuffer<std::uint32_t> bounds_;
    DeviceBuffer<std::uint8_t> codes_;
    ProductView view_;
};

// out (count x d) <- the reconstructions of vectors first .. first + count - 1 (decode_product_row,
// bit for bit), whose anchors are assignments[first ..]; a thread per value.
void launch_decode_product(const ProductView& codes, const std::uint32_t* assignments, std::size_t first,
                           std::size_t count, float* out, cudaStream_t stream);

}  // namespace vlattice::cuda
