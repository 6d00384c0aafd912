// Page-locked host memory that device values come down through: pageable copies of all anchors ran
// at 1.5 GB/s on the H100 machine. Grown on demand and kept.
#pragma once

#include "runtime/cuda_check.hpp"
#include "runtime/device_buffer.hpp"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstring>

namespace vlattice::cuda {

template <class T>
class PinnedStaging {
public:
    void reserve(std::size_t count) { grow_buffer(buffer_, count); }
    void release() { buffer_ = {}; }

    // `count` values from `device`, in the staging memory once the stream has run up to here.
    const T* fetch(const T* device, std::size_t count, cudaStream_t stream) {
        grow_buffer(buffer_, count);
        CUDA_CHECK(cudaMemcpyAsync(buffer_.data(), device, count * sizeof(T), cudaMemcpyDeviceToHost, stream));
        CUDA_CHECK(cudaStreamSynchronize(stream));
        return buffer_.data();
    }

    void copy_down(const T* device, std::size_t count, T* host, cudaStream_t stream) {
        std::memcpy(host, fetch(device, count, stream), count * sizeof(T));
    }

private:
    PinnedBuffer<T> buffer_;
};

}  // namespace vlattice::cuda
