// IEEE 754 binary16 <-> float32, for .npy float16 input and f16 anchor storage. The compiler's
// _Float16 does the rounding (to nearest, ties to even) so no bit-twiddling lives here.
#pragma once

#include <cstdint>
#include <cstring>

namespace vlattice {

inline float half_to_float(std::uint16_t bits) {
    _Float16 value;
    std::memcpy(&value, &bits, sizeof value);
    return static_cast<float>(value);
}

inline std::uint16_t float_to_half(float value) {
    const _Float16 half = static_cast<_Float16>(value);
    std::uint16_t bits;
    std::memcpy(&bits, &half, sizeof bits);
    return bits;
}

}  // namespace vlattice
