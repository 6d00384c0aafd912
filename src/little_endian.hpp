// Fixed-width little-endian integers for the .vlat file. Bytes are composed with shifts, so the
// on-disk layout never depends on the host's byte order or on struct padding; compilers turn these
// loops into single loads and stores.
#pragma once

#include <cstddef>
#include <cstdint>
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

}  // namespace vlattice::le
