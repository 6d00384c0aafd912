// What the device search's kernels share (include/vlattice/search.hpp, src/search/search_scores.hpp): 64-bit
// keys, a score's ordered_bits over the vector id, so that they sort as the CPU orders (score, id)
// pairs; the scores themselves, rounding for rounding as the CPU computes them; the grid's shapes.
#pragma once

#include "math/ordered_distance.cuh"
#include "math/warp_math.cuh"

#include <math_constants.h>

#include <cstddef>
#include <cstdint>

namespace vlattice::cuda {

constexpr int kSearchThreads = 256;
constexpr int kHalfWarpsPerBlock = kSearchThreads / kDistanceLanes;

__device__ __forceinline__ std::size_t thread_index() {
    return static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ std::size_t half_warp_index() {
    return static_cast<std::size_t>(blockIdx.x) * kHalfWarpsPerBlock + threadIdx.x / kDistanceLanes;
}

// Blocks of kSearchThreads for `threads` threads, or for `items` half warps.
inline unsigned blocks_for(std::size_t threads) {
    return static_cast<unsigned>(ceil_div(threads, kSearchThreads));
}
inline unsigned half_warp_blocks(std::size_t items) {
    return static_cast<unsigned>(ceil_div(items, kHalfWarpsPerBlock));
}

__device__ __forceinline__ std::uint64_t sort_key(float score, std::uint32_t id) {
    return static_cast<std::uint64_t>(ordered_bits(score)) << 32 | id;
}
__device__ __forceinline__ float key_score(std::uint64_t key) {
    return from_ordered_bits(static_cast<unsigned>(key >> 32));
}
__device__ __forceinline__ std::uint32_t key_id(std::uint64_t key) {
    return static_cast<std::uint32_t>(key);
}

// src/search/search_scores.hpp's inner_product_score.
__device__ __forceinline__ float inner_product_score(float dot) {
    return isnan(dot) ? CUDART_INF_F : __fsub_rn(0.0f, dot);
}

// The CPU's exact_score against row, by the half warp: both half warps of a warp must call.
template <class Row>
__device__ __forceinline__ float exact_score(const float* __restrict__ query, const Row& row, int d, int l,
                                             bool inner_product) {
    if (inner_product) {
        return inner_product_score(ordered_dot(query, row, d, l));
    }
    return ordered_squared_distance(query, row, d, l);
}

// src/search/search_scores.hpp's adc_l2_score and adc_ip_score.
__device__ __forceinline__ float adc_l2_score(float probe, float extra, float sum) {
    const float x = __fsub_rn(__fadd_rn(probe, extra), __fadd_rn(sum, sum));
    return x > 0.0f ? x : isnan(x) ? CUDART_INF_F : 0.0f;
}
__device__ __forceinline__ float adc_ip_score(float probe, float sum) {
    return inner_product_score(__fadd_rn(__fsub_rn(0.0f, probe), sum));
}

}  // namespace vlattice::cuda
