// The element types vector files store, and reading them into float32 rows. Widening is a plain
// loop the compiler vectorises; the staging buffer keeps memory at the matrix plus a few MiB.
#pragma once

#include "io/binary_file.hpp"
#include "vlattice/half.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace vlattice::io {

// IEEE binary16 as stored on disk, kept distinct from uint16_t so overloads pick the right widening.
struct Half {
    std::uint16_t bits;
};

inline float to_float(float value) { return value; }
inline float to_float(std::uint8_t value) { return static_cast<float>(value); }
inline float to_float(std::int32_t value) { return static_cast<float>(value); }
inline float to_float(Half value) { return half_to_float(value.bits); }

template <typename T>
void widen(const T* source, std::size_t count, float* destination) {
    for (std::size_t i = 0; i < count; ++i) {
        destination[i] = to_float(source[i]);
    }
}

constexpr std::size_t kStagingBytes = std::size_t{8} << 20;

// Reads `count` values of T from the file's current position into `destination` as float32.
template <typename T>
void read_as_float(BinaryFile& file, std::size_t count, float* destination, const std::string& what) {
    if constexpr (std::is_same_v<T, float>) {
        file.read(destination, count * sizeof(float), what);
    } else {
        const std::size_t block = kStagingBytes / sizeof(T);
        std::vector<T> staging(std::min(block, count));
        std::size_t done = 0;
        while (done < count) {
            const std::size_t now = std::min(staging.size(), count - done);
            file.read(staging.data(), now * sizeof(T), what);
            widen(staging.data(), now, destination + done);
            done += now;
        }
    }
}

}  // namespace vlattice::io
