// A product-coded file's codebook and scan layout uploaded once, for the search.
#pragma once

#include "runtime/device_buffer.hpp"
#include "search/product_row.cuh"

#include "codes/product_scan.hpp"
#include "vlattice/format.hpp"

#include <cuda_runtime.h>

#include <cstdint>

namespace vlattice::cuda {

class DeviceProduct {
public:
    // The caller has checked the file (check_compressed_set); `scan` is product_scan(file).
    DeviceProduct(const VlatFile& file, const ProductScan& scan, cudaStream_t stream);

    const ProductView& view() const { return view_; }

private:
    DeviceBuffer<std::uint8_t> codes_;
    DeviceBuffer<float> extra_;
    DeviceBuffer<float> rotation_;
    DeviceBuffer<float> centroids_;
    DeviceBuffer<std::uint32_t> bounds_;
    DeviceBuffer<std::uint32_t> assignments_;
    DeviceBuffer<std::uint32_t> positions_;
    ProductView view_;
};

}  // namespace vlattice::cuda
