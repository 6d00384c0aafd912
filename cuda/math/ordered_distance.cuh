// src/numeric.hpp's ordered_squared_distance and ordered_dot on the device, rounding for rounding,
// by the 16 threads of a half warp: thread l is lane l (coordinates l, l + 16, ..., in turn), and
// the shuffles add the lanes in the same tree. Float, with separate multiplies and adds (no fused
// multiply-add). The shuffles span the whole warp, so both of its half warps must call together;
// every thread of the half warp returns the result.
#pragma once

#include "math/warp_math.cuh"

namespace vlattice::cuda {

constexpr int kDistanceLanes = 16;  // as in src/numeric.hpp

namespace detail {

// sum_k term(a[k], second(k)) in the lanes and the tree. Coordinate k of the second operand is
// second(k), so that it may be decoded on the fly.
template <class Term, class Second>
__device__ inline float ordered_lane_sum(const float* __restrict__ a, const Second& second, int d, int l, Term term) {
    float sum = 0.0f;
    for (int k = l; k < d; k += kDistanceLanes) {
        sum = __fadd_rn(sum, term(a[k], second(k)));
    }
#pragma unroll
    for (int width = kDistanceLanes / 2; width > 0; width /= 2) {
        // Lane l < width adds lane l + width; the others' sums no longer matter.
        sum = __fadd_rn(sum, __shfl_down_sync(kFullMask, sum, width, kDistanceLanes));
    }
    return __shfl_sync(kFullMask, sum, 0, kDistanceLanes);
}

struct SquaredDifference {
    __device__ float operator()(float x, float y) const {
        const float diff = __fsub_rn(x, y);
        return __fmul_rn(diff, diff);
    }
};

struct Product {
    __device__ float operator()(float x, float y) const { return __fmul_rn(x, y); }
};

template <class Second>
__device__ inline float ordered_squared_distance(const float* __restrict__ a, const Second& second, int d, int l) {
    return ordered_lane_sum(a, second, d, l, SquaredDifference{});
}

template <class Second>
__device__ inline float ordered_dot(const float* __restrict__ a, const Second& second, int d, int l) {
    return ordered_lane_sum(a, second, d, l, Product{});
}

struct StoredRow {
    const float* __restrict__ row;
    __device__ float operator()(int k) const { return row[k]; }
};

}  // namespace detail

__device__ inline float ordered_squared_distance(const float* __restrict__ a, const float* __restrict__ b, int d,
                                                 int l) {
    return detail::ordered_squared_distance(a, detail::StoredRow{b}, d, l);
}

__device__ inline float ordered_dot(const float* __restrict__ a, const float* __restrict__ b, int d, int l) {
    return detail::ordered_dot(a, detail::StoredRow{b}, d, l);
}

// ordered_squared_distance by one thread alone, for rows of at most kMax coordinates: the 16 lanes
// in registers, each adding its coordinates in turn, then the same tree. Coordinate k of the second
// operand is second(k).
template <int kMax, class Second>
__device__ inline float ordered_squared_distance_alone(const float* __restrict__ a, const Second& second, int d) {
    float lane[kDistanceLanes];
#pragma unroll
    for (int l = 0; l < kDistanceLanes; ++l) {
        lane[l] = 0.0f;
    }
#pragma unroll
    for (int k = 0; k < kMax; ++k) {
        if (k < d) {
            float& sum = lane[k % kDistanceLanes];
            sum = __fadd_rn(sum, detail::SquaredDifference{}(a[k], second(k)));
        }
    }
#pragma unroll
    for (int width = kDistanceLanes / 2; width > 0; width /= 2) {
#pragma unroll
        for (int l = 0; l < width; ++l) {
            lane[l] = __fadd_rn(lane[l], lane[l + width]);
        }
    }
    return lane[0];
}

// work(row, valid, lane) for rows [0, count), one half warp per row: half warp h of `half_warps`
// takes rows h, h + half_warps, ... Every half warp makes the same number of turns, so both halves
// of a warp reach the distance's shuffles together; on a turn past the end `valid` is false and the
// row is 0.
template <class Work>
__device__ void for_rows_by_half_warps(std::size_t count, std::size_t half_warp, std::size_t half_warps, Work work) {
    const int lane = static_cast<int>(threadIdx.x % kDistanceLanes);
    for (std::size_t base = 0; base < count; base += half_warps) {
        const std::size_t row = base + half_warp;
        work(row < count ? row : 0, row < count, lane);
    }
}

}  // namespace vlattice::cuda
