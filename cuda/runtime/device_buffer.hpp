// Owners of device memory and of page-locked host memory. Move-only: a buffer has exactly one owner,
// and its memory goes back when that owner goes.
#pragma once

#include "runtime/cuda_check.hpp"

#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <type_traits>
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

// Where a buffer's memory comes from and goes back to.
struct DeviceMemory {
    static constexpr const char* kAllocate = "cudaMalloc";
    static constexpr bool kHostReadable = false;
    static cudaError_t allocate(void** data, std::size_t bytes) { return cudaMalloc(data, bytes); }
    static void free(void* data) noexcept { cudaFree(data); }
};

// Page-locked host memory: the DMA engines copy from it directly, and asynchronously.
struct PinnedMemory {
    static constexpr const char* kAllocate = "cudaMallocHost";
    static constexpr bool kHostReadable = true;
    static cudaError_t allocate(void** data, std::size_t bytes) { return cudaMallocHost(data, bytes); }
    static void free(void* data) noexcept { cudaFreeHost(data); }
};

}  // namespace detail

template <class T, class Memory>
class OwnedBuffer {
public:
    using value_type = T;

    OwnedBuffer() = default;
    explicit OwnedBuffer(std::size_t count) : size_(count) {
        if (count > 0) {
            detail::check_allocation(Memory::allocate(reinterpret_cast<void**>(&data_), count * sizeof(T)),
                                     Memory::kAllocate, count * sizeof(T));
        }
    }
    ~OwnedBuffer() { release(); }

    OwnedBuffer(const OwnedBuffer&) = delete;
    OwnedBuffer& operator=(const OwnedBuffer&) = delete;
    OwnedBuffer(OwnedBuffer&& other) noexcept
        : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
    OwnedBuffer& operator=(OwnedBuffer&& other) noexcept {
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

    // Only host memory may be indexed from the host; on device memory this does not compile.
    template <class M = Memory, std::enable_if_t<M::kHostReadable, int> = 0>
    T& operator[](std::size_t i) {
        return data_[i];
    }
    template <class M = Memory, std::enable_if_t<M::kHostReadable, int> = 0>
    const T& operator[](std::size_t i) const {
        return data_[i];
    }

private:
    // A destructor cannot report a failed free; after a fault the context is lost anyway.
    void release() noexcept {
        if (data_ != nullptr) {
            Memory::free(data_);
        }
        data_ = nullptr;
        size_ = 0;
    }

    T* data_ = nullptr;
    std::size_t size_ = 0;
};

template <class T>
using DeviceBuffer = OwnedBuffer<T, detail::DeviceMemory>;
template <class T>
using PinnedBuffer = OwnedBuffer<T, detail::PinnedMemory>;

// The buffer, grown to at least `count` elements, and its data. The old memory goes back before the
// new is taken; a buffer large enough keeps its memory. cudaFree waits for the whole device, so work
// still queued on the old memory finishes first.
template <class Buffer>
auto* grow_buffer(Buffer& buffer, std::size_t count) {
    if (buffer.size() < count) {
        buffer = Buffer();
        buffer = Buffer(count);
    }
    return buffer.data();
}

// The same for a buffer whose size must be exactly `count` (it is read back or sized from): a buffer
// of another size is replaced, one of that size keeps its memory.
template <class Buffer>
auto* fit_buffer(Buffer& buffer, std::size_t count) {
    if (buffer.size() != count) {
        buffer = Buffer();
        buffer = Buffer(count);
    }
    return buffer.data();
}

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

    // As a visitor of a list of (buffer, element count): the list's memory, as it would be allocated.
    template <class Buffer>
    void operator()(const Buffer&, std::size_t count) {
        add<typename Buffer::value_type>(count);
    }

private:
    std::size_t bytes_ = 0;
};

// Visitors of a list of (buffer, element count) that a group of buffers keeps in one place, so that
// its footprint (a Footprint visits the list) and its memory come from the same sizes.
struct AllocateBuffers {
    template <class Buffer>
    void operator()(Buffer& buffer, std::size_t count) const {
        buffer = Buffer(count);
    }
};
struct ReleaseBuffers {
    template <class Buffer>
    void operator()(Buffer& buffer, std::size_t) const {
        buffer = Buffer();
    }
};

// For lists of scratch that grows on demand: each buffer at least its count (grow_buffer).
struct GrowBuffers {
    template <class Buffer>
    void operator()(Buffer& buffer, std::size_t count) const {
        grow_buffer(buffer, count);
    }
};

}  // namespace vlattice::cuda
