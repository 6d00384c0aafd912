// A file's anchors and residual codes uploaded once, for the decoder and the search.
#pragma once

#include "runtime/device_buffer.hpp"
#include "search/decoded_row.cuh"

#include "vlattice/residual.hpp"
#include "vlattice/types.hpp"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace vlattice::cuda {

class DeviceCodes {
public:
    // The caller has checked that the codes fit the file (check_compressed_set): the kernels trust
    // the layout.
    DeviceCodes(const Matrix& anchors, const ResidualCodes& codes, cudaStream_t stream);

    const CodesView& view() const { return view_; }

private:
    DeviceBuffer<float> anchors_;
    DeviceBuffer<float> offset_;
    DeviceBuffer<float> step_;
    DeviceBuffer<std::uint8_t> codes_;
    DeviceBuffer<CodeField> fields_;
    CodesView view_;
};

}  // namespace vlattice::cuda
