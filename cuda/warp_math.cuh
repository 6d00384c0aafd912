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

// ||a[r] - b[r]||^2 in double for several pairs of rows at once, so that their loads overlap; lanes
// stride over the coordinates, so loads are coalesced across the warp. Each pair's sum takes the
// same steps whatever the count, and every lane returns the same values.
template <int kCount>
__device__ inline void warp_squared_distances(const float* const (&a)[kCount], const float* const (&b)[kCount], int d,
                                              int lane, double (&out)[kCount]) {
    double sum[kCount];
#pragma unroll
    for (int r = 0; r < kCount; ++r) {
        sum[r] = 0.0;
    }
    for (int k = lane; k < d; k += kWarp) {
#pragma unroll
        for (int r = 0; r < kCount; ++r) {
            const double diff = static_cast<double>(a[r][k]) - static_cast<double>(b[r][k]);
            sum[r] = fma(diff, diff, sum[r]);
        }
    }
#pragma unroll
    for (int r = 0; r < kCount; ++r) {
        out[r] = warp_sum(sum[r]);
    }
}

// One row x against several rows.
template <int kCount>
__device__ inline void warp_squared_distances(const float* __restrict__ x, const float* const (&rows)[kCount], int d,
                                              int lane, double (&out)[kCount]) {
    const float* xs[kCount];
#pragma unroll
    for (int r = 0; r < kCount; ++r) {
        xs[r] = x;
    }
    warp_squared_distances<kCount>(xs, rows, d, lane, out);
}

__device__ inline double warp_squared_distance(const float* __restrict__ a, const float* __restrict__ b, int d,
                                               int lane) {
    const float* const rows[1] = {b};
    double out[1];
    warp_squared_distances<1>(a, rows, d, lane, out);
    return out[0];
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
