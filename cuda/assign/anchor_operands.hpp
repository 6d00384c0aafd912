// What the assign needs of the anchors besides their rows: float32 norms and 16-bit operands
// (half_operands.cuh), with the heads' norms and the largest head norm and rounding for the single
// product's window. Made afresh from the rows before each assign, since updates and uploads move them.
#pragma once

#include "assign/assign.cuh"
#include "runtime/device_buffer.hpp"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace vlattice::cuda {

class AnchorOperands {
public:
    void add_footprint(Footprint& need, std::size_t m, std::size_t d) { buffers(m, d, need); }
    void allocate(std::size_t m, std::size_t d);
    void release() { buffers(0, 0, ReleaseBuffers{}); }

    // From the m rows of d floats at `rows`, in `type` scaled by 2^exponent.
    void queue(const float* rows, std::size_t m, int d, HalfType type, int exponent, cudaStream_t stream);
    // The anchors' side of the 16-bit operands.
    HalfOperands half(HalfType type, int exponent) const;
    const float* norms() const { return norms_.data(); }
    const unsigned* max_norm_bits() const { return max_norm_bits_.data(); }
    const std::uint16_t* head() const { return head_.data(); }
    const std::uint16_t* tail() const { return tail_.data(); }

private:
    // Norms in whole tiles, +inf past the last anchor: the single-product kernel copies a tile's at
    // once, and the columns of missing anchors come out at +inf.
    template <class Each>
    void buffers(std::size_t m, std::size_t d, Each&& each) {
        const std::size_t stride = static_cast<std::size_t>(half_stride(static_cast<int>(d)));
        const std::size_t padded = (m + kFastTile - 1) / kFastTile * kFastTile;
        each(norms_, padded);
        each(head_norms_, padded);
        each(head_, m * stride);
        each(tail_, m * stride);
    }

    DeviceBuffer<float> norms_;
    DeviceBuffer<float> head_norms_;  // of the 16-bit heads: the single product's norms
    DeviceBuffer<std::uint16_t> head_;
    DeviceBuffer<std::uint16_t> tail_;
    DeviceBuffer<unsigned> max_norm_bits_{1};
    DeviceBuffer<unsigned> head_maxima_{2};  // largest head norm and rounding (launch_anchor_operands)
    DeviceBuffer<unsigned> flags_{1};
};

}  // namespace vlattice::cuda
