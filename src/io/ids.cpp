#include "io/ids.hpp"

#include "vlattice/io.hpp"

#include <cmath>
#include <sstream>

namespace vlattice {

namespace {

std::string cell(std::size_t row, std::size_t column) {
    return "row " + std::to_string(row) + " (0-based), column " + std::to_string(column) + " (0-based)";
}

template <class T>
std::string text(T value) {
    std::ostringstream out;
    out << value;
    return out.str();
}

}  // namespace

namespace io {

IdMatrix whole_ids(const Matrix& values, const std::string& where) {
    // 2^63 as a float: ids at or above it would not fit int64.
    constexpr float kBeyond = 9223372036854775808.0f;
    IdMatrix ids(values.rows, values.cols);
    for (std::size_t q = 0; q < values.rows; ++q) {
        for (std::size_t r = 0; r < values.cols; ++r) {
            const float value = values.row(q)[r];
            if (!(value >= 0.0f && value < kBeyond && value == std::floor(value))) {
                throw Error(where + ": " + cell(q, r) + " holds " + text(value) +
                            ", not a vector id (a whole number >= 0)");
            }
            ids.row(q)[r] = static_cast<std::int64_t>(value);
        }
    }
    return ids;
}

}  // namespace io

void check_vector_ids(const IdMatrix& ids, std::uint64_t n, const std::string& name) {
    for (std::size_t q = 0; q < ids.rows; ++q) {
        for (std::size_t r = 0; r < ids.cols; ++r) {
            const std::int64_t id = ids.row(q)[r];
            if (id < 0 || static_cast<std::uint64_t>(id) >= n) {
                throw Error(name + ": " + cell(q, r) + " holds " + std::to_string(id) + ", not a vector id in [0, " +
                            std::to_string(n) + ")");
            }
        }
    }
}

}  // namespace vlattice
