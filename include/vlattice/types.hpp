// Core value types shared by every part of vlattice.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <memory>
#include <string>
#include <utility>
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

// std::allocator, except that a vector's resize(n) leaves the new values unset rather than zeroing
// them: a reader can then fill a large Matrix from several threads, each touching its own pages
// first, where zeroing it would be a serial pass over all of it (seconds for tens of GB).
template <class T>
struct UnsetAllocator : std::allocator<T> {
    template <class U>
    struct rebind {
        using other = UnsetAllocator<U>;
    };
    UnsetAllocator() = default;
    template <class U>
    UnsetAllocator(const UnsetAllocator<U>&) noexcept {}

    template <class U>
    void construct(U* place) noexcept {
        ::new (static_cast<void*>(place)) U;
    }
    template <class U, class... Args>
    void construct(U* place, Args&&... args) {
        ::new (static_cast<void*>(place)) U(std::forward<Args>(args)...);
    }
};

// A Matrix's values.
using Floats = std::vector<float, UnsetAllocator<float>>;

// Dense row-major float32 matrix: the in-memory form of points and anchors.
struct Matrix {
    std::size_t rows = 0;
    std::size_t cols = 0;
    Floats data;

    Matrix() = default;
    // Zeroed.
    Matrix(std::size_t r, std::size_t c) : rows(r), cols(c), data(r * c, 0.0f) {}
    // Its values unset, for a reader that writes every one of them.
    static Matrix unset(std::size_t r, std::size_t c) {
        Matrix out;
        out.rows = r;
        out.cols = c;
        out.data.resize(r * c);
        return out;
    }

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
