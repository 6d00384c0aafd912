// Fixed-width little-endian integers for the .vlat file. Bytes are composed with shifts, so the
// on-disk layout never depends on the host's byte order or on struct padding; compilers turn these
// loops into single loads and stores.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

namespace vlattice::le {

template <typename T>
void store(std::uint8_t* out, T value) {
    static_assert(std::is_unsigned_v<T>, "little-endian fields are unsigned integers");
    for (std::size_t i = 0; i < sizeof(T); ++i) {
        out[i] = static_cast<std::uint8_t>(value >> (8 * i));
    }
}

template <typename T>
T load(const std::uint8_t* in) {
    static_assert(std::is_unsigned_v<T>, "little-endian fields are unsigned integers");
    T value = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) {
        value = static_cast<T>(value | static_cast<T>(static_cast<T>(in[i]) << (8 * i)));
    }
    return value;
}

template <typename T>
void append(std::vector<std::uint8_t>& out, T value) {
    const std::size_t at = out.size();
    out.resize(at + sizeof(T));
    store(out.data() + at, value);
}

// float32 values travel as the u32 of their IEEE 754 bits.
inline void store_float(std::uint8_t* out, float value) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &value, sizeof bits);
    store(out, bits);
}

inline void append_float(std::vector<std::uint8_t>& out, float value) {
    const std::size_t at = out.size();
    out.resize(at + sizeof(float));
    store_float(out.data() + at, value);
}

inline float load_float(const std::uint8_t* in) {
    const auto bits = load<std::uint32_t>(in);
    float value = 0.0f;
    std::memcpy(&value, &bits, sizeof value);
    return value;
}

}  // namespace vlattice::le
