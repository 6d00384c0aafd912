#include "points/stored_rows.cuh"

#include "runtime/cuda_check.hpp"

#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

namespace vlattice::cuda {

namespace {

constexpr int kThreads = 256;

__device__ inline float widened(float v) { return v; }
__device__ inline float widened(__half v) { return __half2float(v); }
__device__ inline float widened(std::uint8_t v) { return static_cast<float>(v); }
__device__ inline float widened(std::int8_t v) { return static_cast<float>(v); }

template <class T>
__global__ void widen_kernel(const T* __restrict__ stored, std::size_t count, float* __restrict__ out) {
    const std::size_t step = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += step) {
        out[i] = widened(stored[i]);
    }
}

template <class T>
void widen(const void* stored, std::size_t count, float* out, cudaStream_t stream) {
    const auto blocks = static_cast<unsigned>(std::min<std::size_t>((count + kThreads - 1) / kThreads, 65536));
    widen_kernel<T><<<blocks, kThreads, 0, stream>>>(static_cast<const T*>(stored), count, out);
    check_launch("widen_kernel", stream);
}

}  // namespace

void launch_widen_stored(const void* stored, StoredType type, std::size_t count, float* out, cudaStream_t stream) {
    if (count == 0) {
        return;
    }
    switch (type) {
    case StoredType::f32: widen<float>(stored, count, out, stream); return;
    case StoredType::f16: widen<__half>(stored, count, out, stream); return;
    case StoredType::u8: widen<std::uint8_t>(stored, count, out, stream); return;
    case StoredType::i8: widen<std::int8_t>(stored, count, out, stream); return;
    }
}

}  // namespace vlattice::cuda
