// A compressed set's reconstructions on the device, decoded exactly as decode_row
// (include/vlattice/residual.hpp) decodes them on the CPU.
#pragma once

#include "math/ordered_distance.cuh"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace vlattice::cuda {

// Where dimension k's code lies in a vector's code bytes (CodeLayout), and the mask of its width.
// Mask 0 (width 0) reads no byte: a vector whose widths are all 0 has no code bytes at all.
struct alignas(8) CodeField {
    std::uint32_t byte = 0;
    std::uint16_t shift = 0;
    std::uint16_t mask = 0;
};

// c + (offset + step * code), rounded step by step as the CPU (built with -ffp-contract=off) does.
__device__ __forceinline__ float decode_value(float c, float offset, float step, unsigned code) {
    return __fadd_rn(c, __fadd_rn(offset, __fmul_rn(step, static_cast<float>(code))));
}

// One vector's reconstruction, coordinate by coordinate, decoded when read.
struct DecodedRow {
    const float* anchor;
    const float* offset;
    const float* step;
    const std::uint8_t* code;
    const CodeField* fields;

    __device__ float operator()(int k) const {
        const CodeField f = fields[k];
        const unsigned value = f.mask == 0 ? 0u : (static_cast<unsigned>(code[f.byte]) >> f.shift) & f.mask;
        return decode_value(anchor[k], offset[k], step[k], value);
    }
};

// A file's anchors and residual codes on the device. Without codes (has_codes false) the other
// pointers are null and a vector's reconstruction is its anchor.
struct CodesView {
    const float* anchors = nullptr;       // m x d
    const float* offset = nullptr;        // m x d
    const float* step = nullptr;          // m x d
    const std::uint8_t* codes = nullptr;  // n x code_bytes
    const CodeField* fields = nullptr;    // d
    std::size_t code_bytes = 0;
    int d = 0;
    bool has_codes = false;

    // Vector i, a member of `anchor`; only with codes.
    __device__ DecodedRow row(std::uint32_t anchor, std::size_t i) const {
        const std::size_t base = static_cast<std::size_t>(anchor) * d;
        return {anchors + base, offset + base, step + base, codes + i * code_bytes, fields};
    }
};

// Against a reconstruction: the CPU's ordered_squared_distance(a, decode_row(...)), without storing it.
__device__ inline float ordered_squared_distance(const float* __restrict__ a, const DecodedRow& b, int d, int l) {
    return detail::ordered_squared_distance(a, b, d, l);
}

// Against a reconstruction: the CPU's ordered_dot(a, decode_row(...)), without storing it.
__device__ inline float ordered_dot(const float* __restrict__ a, const DecodedRow& b, int d, int l) {
    return detail::ordered_dot(a, b, d, l);
}

}  // namespace vlattice::cuda
