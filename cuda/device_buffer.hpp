// Owners of device memory and of page-locked host memory. Move-only: a buffer has exactly one owner,
// and its memory goes back when that owner goes.
#pragma once

#include "cuda_check.hpp"

#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <utility>

namespace vlattice::cuda {

namespace detail {

// cudaMalloc's own message does not say what was being allocated or how big it was.
inline void check_allocation(cudaError_t status, const char* call, std::size_t bytes) {
    if (status != cudaSuccess) {
        throw Error(std::string("CUDA error: ") + call + " of " + std::to_string(bytes) + " bytes: " +
                    cudaGetErrorName(status) + ": " + cudaGetErrorString(status));
    }
}

}  // namespace detail

template <class T>
class DeviceBuffer {
public:
    DeviceBuffer() = default;
    explicit DeviceBuffer(std::size_t count) : size_(count) {
        if (count > 0) {
            detail::check_allocation(cudaMalloc(reinterpret_cast<void**>(&data_), count * sizeof(T)), "cudaMalloc",
                                     count * sizeof(T));
        }
    }
    ~DeviceBuffer() { release(); }

    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    DeviceBuffer(DeviceBuffer&& other) noexcept
        : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
    DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
        if (this != &other) {
            release();
            data_ = std::exchange(other.data_, nullptr);
            size_ = std::exchange(other.size_, 0);
        }
        return *this;
    }

    T* data() { return data_; }
    const T* data() const { return data_; }
    std::size_t size() const { return size_; }
    std::size_t bytes() const { return size_ * sizeof(T); }

private:
    // A destructor cannot report a failed free; after a fault the context is lost anyway.
    void release() noexcept {
        if (data_ != nullptr) {
            cudaFree(data_);
        }
        data_ = nullptr;
        size_ = 0;
    }

    T* data_ = nullptr;
    std::size_t size_ = 0;
};

// Page-locked host memory: the DMA engines copy from it directly, and asynchronously.
template <class T>
class PinnedBuffer {
public:
    PinnedBuffer() = default;
    explicit PinnedBuffer(std::size_t count) : size_(count) {
        if (count > 0) {
            detail::check_allocation(cudaMallocHost(reinterpret_cast<void**>(&data_), count * sizeof(T)),
                                     "cudaMallocHost", count * sizeof(T));
        }
    }
    ~PinnedBuffer() { release(); }

    PinnedBuffer(const PinnedBuffer&) = delete;
    PinnedBuffer& operator=(const PinnedBuffer&) = delete;
    PinnedBuffer(PinnedBuffer&& other) noexcept
        : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
    PinnedBuffer& operator=(PinnedBuffer&& other) noexcept {
        if (this != &other) {
            release();
            data_ = std::exchange(other.data_, nullptr);
            size_ = std::exchange(other.size_, 0);
        }
        return *this;
    }

    T* data() { return data_; }
    const T* data() const { return data_; }
    std::size_t size() const { return size_; }
    T& operator[](std::size_t i) { return data_[i]; }
    const T& operator[](std::size_t i) const { return data_[i]; }

private:
    void release() noexcept {
        if (data_ != nullptr) {
            cudaFreeHost(data_);
        }
        data_ = nullptr;
        size_ = 0;
    }

    T* data_ = nullptr;
    std::size_t size_ = 0;
};

// Adds up buffer sizes the way the allocator hands them out (2 MiB pages), so that a run that passes
// a memory check also gets its memory.
class Footprint {
public:
    template <class T>
    Footprint& add(std::size_t count) {
        constexpr std::size_t kPage = std::size_t{2} << 20;
        bytes_ += (count * sizeof(T) + kPage - 1) / kPage * kPage;
        return *this;
    }
    std::size_t bytes() const { return bytes_; }

private:
    std::size_t bytes_ = 0;
};

}  // namespace vlattice::cuda
