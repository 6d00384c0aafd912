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

// A float as an unsigned whose order is the float's (negative values included; -0 before +0): so
// that atomicMin on shared memory can keep the least `next` of the lists of one row, and sort keys
// order signed scores.
__device__ __forceinline__ unsigned ordered_bits(float value) {
    const unsigned bits = __float_as_uint(value);
    return (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
}
__device__ __forceinline__ float from_ordered_bits(unsigned bits) {
    return __uint_as_float((bits & 0x80000000u) != 0 ? bits & 0x7fffffffu : ~bits);
}

// Butterfly sum: at each step a lane and its partner add the same two values (in swapped order,
// which IEEE addition does not notice), so every lane ends with the same bits.
__device__ inline double warp_sum(double value) {
#pragma unroll
    for (int offset = kWarp / 2; offset > 0; offset /= 2) {
        value += __shfl_xor_sync(kFullMask, value, offset);
    }
    return value;
}

// Coordinate k of a float32 row: how anchors, and any other float rows, are read by the helpers below.
struct FloatRow {
    const float* row;
    __device__ __forceinline__ float operator()(int k) const { return row[k]; }
};

// ||a[r] - b[r]||^2 in double for several pairs of rows at once, so that their loads overlap; a[r](k)
// and b[r](k) give coordinate k. Lanes stride over the coordinates, so loads are coalesced across the
// warp. Each pair's sum takes the same steps whatever the count, and every lane returns the same values.
template <int kCount, class A, class B>
__device__ inline void warp_squared_distances(const A (&a)[kCount], const B (&b)[kCount], int d, int lane,
                                              double (&out)[kCount]) {
    constexpr int kStrides = 4;
    double sum[kCount];
#pragma unroll
    for (int r = 0; r < kCount; ++r) {
        sum[r] = 0.0;
    }
    // kStrides strides of loads before their arithmetic, so that they are in flight together: one
    // stride at a time, the distances of the points to their anchors (1M x 128) ran at a tenth of the
    // DRAM bandwidth, and an unrolled loop that tested k < d per stride still waited on each (the
    // test kept the compiler from hoisting the next stride's loads). The order of each sum is the
    // same either way: each lane adds its coordinates in increasing k.
    int k = lane;
    for (; k + (kStrides - 1) * kWarp < d; k += kStrides * kWarp) {
        float av[kStrides][kCount];
        float bv[kStrides][kCount];
#pragma unroll
        for (int t = 0; t < kStrides; ++t) {
#pragma unroll
            for (int r = 0; r < kCount; ++r) {
                av[t][r] = a[r](k + t * kWarp);
                bv[t][r] = b[r](k + t * kWarp);
            }
        }
#pragma unroll
        for (int t = 0; t < kStrides; ++t) {
#pragma unroll
            for (int r = 0; r < kCount; ++r) {
                const double diff = static_cast<double>(av[t][r]) - static_cast<double>(bv[t][r]);
                sum[r] = fma(diff, diff, sum[r]);
            }
        }
    }
    for (; k < d; k += kWarp) {
#pragma unroll
        for (int r = 0; r < kCount; ++r) {
            const double diff = static_cast<double>(a[r](k)) - static_cast<double>(b[r](k));
            sum[r] = fma(diff, diff, sum[r]);
        }
    }
#pragma unroll
    for (int r = 0; r < kCount; ++r) {
        out[r] = warp_sum(sum[r]);
    }
}

// One row x against several float32 rows.
template <int kCount, class A>
__device__ inline void warp_squared_distances(const A& x, const float* const (&rows)[kCount], int d, int lane,
                                              double (&out)[kCount]) {
    A xs[kCount];
    FloatRow bs[kCount];
#pragma unroll
    for (int r = 0; r < kCount; ++r) {
        xs[r] = x;
        bs[r] = FloatRow{rows[r]};
    }
    warp_squared_distances<kCount>(xs, bs, d, lane, out);
}

template <class A>
__device__ inline double warp_squared_norm(const A& a, int d, int lane) {
    double sum = 0.0;
    for (int k = lane; k < d; k += kWarp) {
        const double v = static_cast<double>(a(k));
        sum += v * v;
    }
    return warp_sum(sum);
}

}  // namespace vlattice::cuda
