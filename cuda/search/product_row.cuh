// A product-coded file on the device (ProductView), and one vector's reconstruction decoded
// coordinate by coordinate as decode_product_row (include/vlattice/product_codes.hpp) decodes it.
#pragma once

#include "math/ordered_distance.cuh"

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
    int bits = 0;
    // ScanUnits: lookups per vector, entries of each one's table, bytes of each one's index.
    int unit_count = 0;
    int unit_values = 0;
    int unit_width = 1;
    bool active = false;  // a product-coded file
};

// Entries of one query's tables, every lookup's.
__host__ __device__ __forceinline__ std::size_t table_values(const ProductView& view) {
    return static_cast<std::size_t>(view.unit_count) * static_cast<std::size_t>(view.unit_values);
}

// The laid-out codes of the vector at member position `position`: lookup u's index starts at
// [u * kScanBlock * unit_width].
__device__ __forceinline__ const std::uint8_t* scan_code(const ProductView& view, std::size_t position) {
    const std::size_t units = static_cast<std::size_t>(view.unit_count);
    return view.codes + ((position / kScanBlock) * units * kScanBlock + position % kScanBlock) * view.unit_width;
}

// Lookup u's index (a code byte, or a code of more than 8 bits) of the vector whose scan_code is `code`.
__device__ __forceinline__ unsigned scan_unit(const ProductView& view, const std::uint8_t* code, int u) {
    const std::uint8_t* at = code + static_cast<std::size_t>(u) * kScanBlock * view.unit_width;
    return view.unit_width == 1 ? at[0] : at[0] | static_cast<unsigned>(at[1]) << 8;
}

// Code j of the vector whose scan_code is `code`.
__device__ __forceinline__ unsigned scan_code_value(const ProductView& view, const std::uint8_t* code, int j) {
    if (view.bits == 4) {
        return (scan_unit(view, code, j / 2) >> (4 * (j % 2))) & 0xfu;
    }
    return scan_unit(view, code, j);
}

// Centroid c of code j's stage, indexed by rotated coordinate.
__device__ __forceinline__ const float* code_centroid(const ProductView& view, int j, unsigned c) {
    return view.centroids + (static_cast<std::size_t>(j / view.subspaces) << view.bits | c) * view.p;
}

// Coordinate k of the reconstruction c[k] + s[k], s[k] summed over t = 0 .. p - 1 from 0 in order,
// z[t] summed over the stages in order (code_values).
struct ProductRow {
    const float* anchor;
    const std::uint8_t* code;  // scan_code
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
