// Points in the element type their file stores: float32, float16, uint8 or int8 rows. A fit, its
// k-means++ and its coding pass read them through a PointView, so a float16 or 8-bit input is held
// once, in its own bytes (a quarter of float32's for uint8), and never as a float32 copy of the
// whole set: each consumer widens the rows it is working on, a row or a block at a time. Every
// value of these types is exact in float32, so a fit of stored points equals the fit of their
// float32 values, bit for bit.
#pragma once

#include "vlattice/types.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace vlattice {

namespace io {
class MappedRows;
}

enum class StoredType : std::uint8_t { f32, f16, u8, i8 };

const char* stored_type_name(StoredType type);  // "float32", "float16", "uint8", "int8"
std::size_t stored_type_bytes(StoredType type);

// Rows held by someone else (a Matrix, a PointSet), read as float32. Cheap to copy; the rows must
// outlive it. A Matrix converts to one implicitly, so every function taking a view takes a Matrix.
class PointView {
public:
    PointView() = default;
    PointView(const Matrix& points);  // NOLINT(google-explicit-constructor): a Matrix is a view's commonest source
    PointView(StoredType type, const void* data, std::size_t rows, std::size_t cols);

    std::size_t rows = 0;
    std::size_t cols = 0;

    StoredType type() const { return type_; }
    // The Matrix this view was made from, else nullptr: where a caller needs float32 rows in place.
    const Matrix* matrix() const { return matrix_; }
    // Row 0's first value; row i's lies i * pitch() bytes on.
    const void* data() const { return data_; }
    // Bytes from one row's values to the next row's: cols values, or more where each row of a mapped
    // file begins with its dimension (TEXMEX).
    std::size_t pitch() const { return pitch_ != 0 ? pitch_ : cols * stored_type_bytes(type_); }
    bool contiguous() const { return pitch() == cols * stored_type_bytes(type_); }
    // Rows [first, first + count) of the stored values as they are, reported to the mapping (where
    // there is one) as read: row first + r at the result + r * pitch().
    const char* raw_rows(std::size_t first, std::size_t count) const;

    // Row i as float32: the row itself under float32, else widened into `scratch` (cols values).
    const float* row(std::size_t i, float* scratch) const;
    // Rows [first, first + count) widened (or under float32 copied) into `out` (count x cols), on the
    // OpenMP threads when large.
    void widen_rows(std::size_t first, std::size_t count, float* out) const;
    // Rows [first, first + count) in their stored type, packed at `out` (count x cols values, without
    // a TEXMEX row's lead), on the OpenMP threads when large: what a GPU's tile of streamed points takes.
    void pack_rows(std::size_t first, std::size_t count, void* out) const;
    // Rows [first, first + count) as float32 and contiguous: in place under float32, else widened into
    // `scratch`, which is resized to hold them.
    const float* block(std::size_t first, std::size_t count, std::vector<float>& scratch) const;
    // Every row as float32 (a copy).
    Matrix widened() const;
    // The listed rows (each below rows), in list order, as float32.
    Matrix select(const std::vector<std::uint32_t>& rows) const;
    // Rows [first, first + count) as a view of their own.
    PointView slice(std::size_t first, std::size_t count) const;
    // Whether the rows stay in their file, read through a mapping (PointSet::mapped).
    bool mapped() const { return mapping_ != nullptr; }

private:
    friend class PointSet;
    // What every read above reports to the mapping, where there is one, before it reads.
    void reading(std::size_t first, std::size_t count) const;
    // The shares of rows that widen_rows and pack_rows work through (point_set.cpp).
    template <class Rows, class Values>
    void in_shares(std::size_t first, std::size_t count, Rows rows, Values values) const;

    StoredType type_ = StoredType::f32;
    const void* data_ = nullptr;
    std::size_t pitch_ = 0;  // 0: contiguous rows
    const Matrix* matrix_ = nullptr;
    const io::MappedRows* mapping_ = nullptr;
};

// The float32 rows of `points`: its Matrix where it has one, else `widened` filled with them.
const Matrix& as_matrix(const PointView& points, Matrix& widened);

// Points that own their rows, in their stored type: a Matrix under float32, else raw values.
class PointSet {
public:
    PointSet() = default;
    explicit PointSet(Matrix points);
    // rows x cols values of `type` (not f32), unset, for a reader to fill through values().
    static PointSet unset(StoredType type, std::size_t rows, std::size_t cols);
    // rows x cols values of `type` that stay in the file at `path`, the rows one after the other from
    // byte `offset`, each `lead` bytes (a TEXMEX row's dimension) before its values, read through a
    // memory mapping of which about `resident_limit` bytes stay resident (src/io/mapped_rows.hpp);
    // throws Error naming the file when it cannot be mapped.
    static PointSet mapped(const std::string& path, std::uint64_t offset, StoredType type, std::size_t rows,
                           std::size_t cols, std::size_t resident_limit, std::size_t lead = 0);

    std::size_t rows() const { return rows_; }
    std::size_t cols() const { return cols_; }
    StoredType type() const { return type_; }
    std::size_t bytes() const { return rows_ * cols_ * stored_type_bytes(type_); }

    PointView view() const;
    // The float32 rows, which only a float32 set has (Error otherwise).
    Matrix& floats();
    // The raw values of a set that is not float32, rows x cols of its type.
    void* values() { return bytes_.data(); }

private:
    StoredType type_ = StoredType::f32;
    std::size_t rows_ = 0;
    std::size_t cols_ = 0;
    std::size_t lead_ = 0;  // of each mapped row, before its values
    Matrix floats_;
    std::vector<std::uint8_t, UnsetAllocator<std::uint8_t>> bytes_;
    std::shared_ptr<const io::MappedRows> mapping_;
};

}  // namespace vlattice
