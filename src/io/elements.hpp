// The element types vector files store, and reading them into float32 rows (or int64 ids). Widening is a plain
// loop the compiler vectorises, narrowing float64 one that also checks the range; the staging buffer
// keeps memory at the matrix plus a few MiB.
#pragma once

#include "io/binary_file.hpp"
#include "vlattice/half.hpp"
#include "vlattice/memory.hpp"
#include "vlattice/types.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
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
inline float to_float(std::int8_t value) { return static_cast<float>(value); }
inline float to_float(std::int32_t value) { return static_cast<float>(value); }
inline float to_float(Half value) { return half_to_float(value.bits); }

// A zeroed rows x cols Table (Matrix, or IdMatrix for ids), once it is known to fit the memory a run
// can have: a header or a compressed dataset may promise far more than the file's size.
template <class Table>
Table allocate_table(const std::string& where, std::uint64_t rows, std::uint64_t cols) {
    using Value = typename decltype(Table::data)::value_type;
    const char* type = std::is_same_v<Value, float> ? "float32" : "int64 ids";
    check_memory(where + ": " + count_text(rows) + " x " + count_text(cols) + " " + type,
                 table_bytes(rows, cols, sizeof(Value)));
    return Table(rows, cols);
}

template <typename T>
void widen(const T* source, std::size_t count, float* destination) {
    for (std::size_t i = 0; i < count; ++i) {
        destination[i] = to_float(source[i]);
    }
}

// Integers as vector ids. A uint64 beyond int64 wraps negative, which the id checks then refuse.
template <typename T>
void widen(const T* source, std::size_t count, std::int64_t* destination) {
    static_assert(std::is_integral_v<T>, "ids are read exactly from integers only");
    for (std::size_t i = 0; i < count; ++i) {
        destination[i] = static_cast<std::int64_t>(source[i]);
    }
}

// float32 of `count` float64 values, the first at element `first` of a matrix of `cols` columns. A
// finite value beyond float32's range is an Error naming `where`, its row and its column: a plain
// cast would give Inf, which check_finite would then report as if the file held one.
inline void narrow(const double* source, std::size_t count, std::uint64_t first, std::size_t cols, float* destination,
                   const std::string& where) {
    const auto text = [](double value) {
        std::ostringstream out;
        out << value;
        return out.str();
    };
    for (std::size_t i = 0; i < count; ++i) {
        destination[i] = static_cast<float>(source[i]);
        if (std::isinf(destination[i]) && std::isfinite(source[i])) {
            throw Error(where + ": row " + std::to_string((first + i) / cols) + " (0-based), column " +
                        std::to_string((first + i) % cols) + " (0-based) holds " + text(source[i]) +
                        ", beyond float32's range (magnitudes up to " +
                        text(std::numeric_limits<float>::max()) + ")");
        }
    }
}

constexpr std::size_t kStagingBytes = std::size_t{8} << 20;

// Reads `count` values of T from the file's current position through a staging buffer of a few MiB;
// convert(values, how_many, index_of_the_first) turns each block into float32 in place.
template <typename T, typename Convert>
void read_converted(BinaryFile& file, std::size_t count, const std::string& what, Convert convert) {
    const std::size_t block = kStagingBytes / sizeof(T);
    std::vector<T> staging(std::min(block, count));
    std::size_t done = 0;
    while (done < count) {
        const std::size_t now = std::min(staging.size(), count - done);
        file.read(staging.data(), now * sizeof(T), what);
        convert(staging.data(), now, done);
        done += now;
    }
}

// Reads `count` values of T from the file's current position into `destination`: float32 for vectors,
// int64 for ids.
template <typename T, typename Out>
void read_as(BinaryFile& file, std::size_t count, Out* destination, const std::string& what) {
    if constexpr (std::is_same_v<T, Out>) {
        file.read(destination, count * sizeof(Out), what);
    } else {
        read_converted<T>(file, count, what, [&](const T* values, std::size_t now, std::size_t first) {
            widen(values, now, destination + first);
        });
    }
}

}  // namespace vlattice::io
