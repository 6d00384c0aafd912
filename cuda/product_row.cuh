// A product-coded file on the device (ProductView), and one vector's reconstruction decoded
// coordinate by coordinate as decode_product_row (include/vlattice/product_codes.hpp) decodes it.
#pragma once

#include "ordered_distance.cuh"

#include "codes/product_scan.hpp"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace vlattice::cuda {

// The file's codebook and the scan's layout (src/codes/product_scan.hpp), uploaded by DeviceProduct.
struct ProductView {
    const std::uint8_t* codes = nullptr;       // ProductScan::codes
    const float* extra = nullptr;              // ProductScan::extra, by member position (not for ip)
    const float* rotation = nullptr;           // p x d
    const float* centroids = nullptr;          // S 2^bits x p
    const std::uint32_t* bounds = nullptr;     // subspaces + 1
    const std::uint32_t* assignments = nullptr;  // n: vector id -> anchor
    const std::uint32_t* positions = nullptr;  // n: vector id -> member position
    int p = 0;
    int subspaces = 0;
    int stages = 0;
    int code_count = 0;  // S x M
    int code_bytes = 0;
    int bits = 0;
    bool active = false;  // a product-coded file
};

// The code bytes of the vector at member position `position`: byte b is at [b * kScanBlock].
__device__ __forceinline__ const std::uint8_t* scan_code(const ProductView& view, std::size_t position) {
    return view.codes + (position / kScanBlock) * view.code_bytes * kScanBlock + position % kScanBlock;
}

// Code j of the vector whose scan_code is `code`.
__device__ __forceinline__ unsigned scan_code_value(const ProductView& view, const std::uint8_t* code, int j) {
    const unsigned byte = code[(view.bits == 8 ? j : j / 2) * kScanBlock];
    return view.bits == 8 ? byte : (byte >> (4 * (j % 2))) & 0xfu;
}

// Centroid c of code j's stage, indexed by rotated coordinate.
__device__ __forceinline__ const float* code_centroid(const ProductView& view, int j, unsigned c) {
    return view.centroids + (static_cast<std::size_t>(j / view.subspaces) << view.bits | c) * view.p;
}

// Coordinate k of the reconstruction c[k] + s[k], s[k] summed over t = 0 .. p - 1 from 0 in order,
// z[t] summed over the stages in order (code_values).
struct ProductRow {
    const float* anchor;
    const std::uint8_t* code;  // scan_code: byte b at code[b * kScanBlock]
    ProductView view;
    int d;

    __device__ float operator()(int k) const {
        float s = 0.0f;
        for (int j = 0; j < view.subspaces; ++j) {
            const float* first_stage = code_centroid(view, j, scan_code_value(view, code, j));
            for (unsigned t = view.bounds[j]; t < view.bounds[j + 1]; ++t) {
                float z = first_stage[t];
                for (int stage = 1; stage < view.stages; ++stage) {
                    const int code_j = stage * view.subspaces + j;
                    z = __fadd_rn(z, code_centroid(view, code_j, scan_code_value(view, code, code_j))[t]);
                }
                s = __fadd_rn(s, __fmul_rn(view.rotation[static_cast<std::size_t>(t) * d + k], z));
            }
        }
        return __fadd_rn(anchor[k], s);
    }
};

__device__ inline float ordered_squared_distance(const float* __restrict__ a, const ProductRow& b, int d, int l) {
    return detail::ordered_squared_distance(a, b, d, l);
}
__device__ inline float ordered_dot(const float* __restrict__ a, const ProductRow& b, int d, int l) {
    return detail::ordered_dot(a, b, d, l);
}

}  // namespace vlattice::cuda
