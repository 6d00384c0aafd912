// Device helpers shared by the kernels: double-precision row arithmetic done by one warp, with a
// fixed summation order so that every call on the same row pair gives bit-identical results.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace vlattice::cuda {

constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;

__host__ __device__ inline std::size_t ceil_div(std::size_t a, std::size_t b) { return (a + b - 1) / b; }

// Butterfly sum: at each step a lane and its partner add the same two values (in swapped order,
// which IEEE addition does not notice), so every lane ends with the same bits.
__device__ inline double warp_sum(double value) {
#pragma unroll
    for (int offset = kWarp / 2; offset > 0; offset /= 2) {
        value += __shfl_xor_sync(kFullMask, value, offset);
    }
    return value;
}

// ||a - b||^2 in double; lanes stride over the coordinates, so loads are coalesced across the warp.
// Every lane returns the same value.
__device__ inline double warp_squared_distance(const float* __restrict__ a, const float* __restrict__ b, int d,
                                               int lane) {
    double sum = 0.0;
    for (int k = lane; k < d; k += kWarp) {
        const double diff = static_cast<double>(a[k]) - static_cast<double>(b[k]);
        sum += diff * diff;
    }
    return warp_sum(sum);
}

__device__ inline double warp_squared_norm(const float* __restrict__ a, int d, int lane) {
    double sum = 0.0;
    for (int k = lane; k < d; k += kWarp) {
        const double v = static_cast<double>(a[k]);
        sum += v * v;
    }
    return warp_sum(sum);
}

}  // namespace vlattice::cuda
