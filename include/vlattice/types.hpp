// Core value types shared by every part of vlattice.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace vlattice {

// Every error a user can cause (bad file, bad option, bad value) is reported as an Error whose
// message names the file, the row or the field; the CLI prints it and exits non-zero.
class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// l2 and angular rank by squared L2 distance (angular on vectors scaled to unit length); ip by
// largest inner product, on the vectors as given.
enum class Metric : std::uint8_t { l2 = 0, angular = 1, ip = 2 };

const char* metric_name(Metric metric);
// Throws Error naming the bad value.
Metric parse_metric(const std::string& name);

// Dense row-major float32 matrix: the in-memory form of points and anchors.
struct Matrix {
    std::size_t rows = 0;
    std::size_t cols = 0;
    std::vector<float> data;

    Matrix() = default;
    Matrix(std::size_t r, std::size_t c) : rows(r), cols(c), data(r * c, 0.0f) {}

    float* row(std::size_t i) { return data.data() + i * cols; }
    const float* row(std::size_t i) const { return data.data() + i * cols; }
};

// Row-major vector ids, one row per query: the true neighbours a ground truth lists.
struct IdMatrix {
    std::size_t rows = 0;
    std::size_t cols = 0;
    std::vector<std::int64_t> data;

    IdMatrix() = default;
    IdMatrix(std::size_t r, std::size_t c) : rows(r), cols(c), data(r * c, 0) {}

    std::int64_t* row(std::size_t i) { return data.data() + i * cols; }
    const std::int64_t* row(std::size_t i) const { return data.data() + i * cols; }
};

// The listed rows of `from`, in list order (each id below from.rows).
Matrix select_rows(const Matrix& from, const std::vector<std::uint32_t>& rows);

}  // namespace vlattice
