#include "vlattice/point_set.hpp"

#include "io/elements.hpp"
#include "io/mapped_rows.hpp"

#include <algorithm>
#include <cstring>

namespace vlattice {

namespace {

// Rows widened per parallel share: enough to amortise a thread's start, few enough to spread a tile.
constexpr std::size_t kWidenShareValues = std::size_t{1} << 16;

// `count` values of `type` from `from` into `out`.
void widen_values(StoredType type, const void* from, std::size_t count, float* out) {
    switch (type) {
    case StoredType::f32:
        std::memcpy(out, from, count * sizeof(float));
        return;
    case StoredType::f16:
        io::widen(static_cast<const io::Half*>(from), count, out);
        return;
    case StoredType::u8:
        io::widen(static_cast<const std::uint8_t*>(from), count, out);
        return;
    case StoredType::i8:
        io::widen(static_cast<const std::int8_t*>(from), count, out);
        return;
    }
}

}  // namespace

const char* stored_type_name(StoredType type) {
    switch (type) {
    case StoredType::f16:
        return "float16";
    case StoredType::u8:
        return "uint8";
    case StoredType::i8:
        return "int8";
    case StoredType::f32:
        break;
    }
    return "float32";
}

std::size_t stored_type_bytes(StoredType type) {
    switch (type) {
    case StoredType::f16:
        return 2;
    case StoredType::u8:
    case StoredType::i8:
        return 1;
    case StoredType::f32:
        break;
    }
    return 4;
}

PointView::PointView(const Matrix& points)
    : rows(points.rows), cols(points.cols), data_(points.data.data()), matrix_(&points) {}

PointView::PointView(StoredType type, const void* data, std::size_t rows_, std::size_t cols_)
    : rows(rows_), cols(cols_), type_(type), data_(data) {}

void PointView::reading(std::size_t first, std::size_t count) const {
    if (mapping_ != nullptr && count > 0) {
        mapping_->note_read(static_cast<const char*>(data_) + first * pitch(),
                            (count - 1) * pitch() + cols * stored_type_bytes(type_));
    }
}

const char* PointView::raw_rows(std::size_t first, std::size_t count) const {
    reading(first, count);
    return static_cast<const char*>(data_) + first * pitch();
}

const float* PointView::row(std::size_t i, float* scratch) const {
    const char* values = raw_rows(i, 1);
    if (type_ == StoredType::f32) {
        return reinterpret_cast<const float*>(values);
    }
    widen_values(type_, values, cols, scratch);
    return scratch;
}

// Rows [first, first + count) in shares on the OpenMP threads: rows(r, row, rows_here) for each
// share of whole rows where they lie apart (row r of the range at `row`, pitch() apart), else
// values(v, from, values_here) for each share of values read from `from` (value v of the range).
template <class Rows, class Values>
void PointView::in_shares(std::size_t first, std::size_t count, Rows rows, Values values) const {
    if (!contiguous()) {
        // Rows apart in the file: a share of whole rows at a time.
        const std::size_t rows_per_share = std::max<std::size_t>(1, kWidenShareValues / std::max<std::size_t>(cols, 1));
        const std::size_t shares = (count + rows_per_share - 1) / rows_per_share;
#pragma omp parallel for schedule(static) if (shares > 1)
        for (std::size_t s = 0; s < shares; ++s) {
            const std::size_t at = s * rows_per_share;
            const std::size_t rows_here = std::min(rows_per_share, count - at);
            rows(at, raw_rows(first + at, rows_here), rows_here);
        }
        return;
    }
    const std::size_t element = stored_type_bytes(type_);
    const char* from = static_cast<const char*>(data_) + first * pitch();
    const std::size_t total = count * cols;
    const std::size_t shares = (total + kWidenShareValues - 1) / kWidenShareValues;
#pragma omp parallel for schedule(static) if (shares > 1)
    for (std::size_t s = 0; s < shares; ++s) {
        const std::size_t at = s * kWidenShareValues;
        const std::size_t share = std::min(kWidenShareValues, total - at);
        if (mapping_ != nullptr) {
            mapping_->note_read(from + at * element, share * element);
        }
        values(at, from + at * element, share);
    }
}

void PointView::pack_rows(std::size_t first, std::size_t count, void* out) const {
    const std::size_t element = stored_type_bytes(type_);
    const std::size_t row_bytes = cols * element;
    char* to = static_cast<char*>(out);
    in_shares(
        first, count,
        [&](std::size_t at, const char* rows, std::size_t rows_here) {
            for (std::size_t r = 0; r < rows_here; ++r) {
                std::memcpy(to + (at + r) * row_bytes, rows + r * pitch(), row_bytes);
            }
        },
        [&](std::size_t at, const char* from, std::size_t values) {
            std::memcpy(to + at * element, from, values * element);
        });
}

void PointView::widen_rows(std::size_t first, std::size_t count, float* out) const {
    in_shares(
        first, count,
        [&](std::size_t at, const char* rows, std::size_t rows_here) {
            for (std::size_t r = 0; r < rows_here; ++r) {
                widen_values(type_, rows + r * pitch(), cols, out + (at + r) * cols);
            }
        },
        [&](std::size_t at, const char* from, std::size_t values) { widen_values(type_, from, values, out + at); });
}

const float* PointView::block(std::size_t first, std::size_t count, std::vector<float>& scratch) const {
    if (type_ == StoredType::f32 && contiguous()) {
        return reinterpret_cast<const float*>(raw_rows(first, count));
    }
    scratch.resize(count * cols);
    widen_rows(first, count, scratch.data());
    return scratch.data();
}

Matrix PointView::widened() const {
    Matrix out = Matrix::unset(rows, cols);
    widen_rows(0, rows, out.data.data());
    return out;
}

Matrix PointView::select(const std::vector<std::uint32_t>& picked) const {
    Matrix out = Matrix::unset(picked.size(), cols);
#pragma omp parallel for schedule(static) if (picked.size() * cols > kWidenShareValues)
    for (std::size_t r = 0; r < picked.size(); ++r) {
        const float* values = row(picked[r], out.row(r));
        if (values != out.row(r)) {
            std::copy(values, values + cols, out.row(r));
        }
    }
    return out;
}

PointView PointView::slice(std::size_t first, std::size_t count) const {
    PointView part(type_, static_cast<const char*>(data_) + first * pitch(), count, cols);
    part.pitch_ = pitch_;
    part.mapping_ = mapping_;
    return part;
}

const Matrix& as_matrix(const PointView& points, Matrix& widened) {
    if (points.matrix() != nullptr) {
        return *points.matrix();
    }
    widened = points.widened();
    return widened;
}

PointSet::PointSet(Matrix points) : rows_(points.rows), cols_(points.cols), floats_(std::move(points)) {}

PointSet PointSet::unset(StoredType type, std::size_t rows, std::size_t cols) {
    if (type == StoredType::f32) {
        return PointSet(Matrix::unset(rows, cols));
    }
    PointSet out;
    out.type_ = type;
    out.rows_ = rows;
    out.cols_ = cols;
    out.bytes_.resize(rows * cols * stored_type_bytes(type));
    return out;
}

PointSet PointSet::mapped(const std::string& path, std::uint64_t offset, StoredType type, std::size_t rows,
                          std::size_t cols, std::size_t resident_limit, std::size_t lead) {
    PointSet out;
    out.type_ = type;
    out.rows_ = rows;
    out.cols_ = cols;
    out.lead_ = lead;
    out.mapping_ = std::make_shared<const io::MappedRows>(path, offset, rows, lead + cols * stored_type_bytes(type),
                                                          resident_limit);
    return out;
}

PointView PointSet::view() const {
    if (mapping_) {
        PointView view(type_, static_cast<const char*>(mapping_->data()) + lead_, rows_, cols_);
        view.pitch_ = lead_ + cols_ * stored_type_bytes(type_);
        view.mapping_ = mapping_.get();
        return view;
    }
    if (type_ == StoredType::f32) {
        return PointView(floats_);
    }
    return PointView(type_, bytes_.data(), rows_, cols_);
}

Matrix& PointSet::floats() {
    if (mapping_) {
        throw Error("the points stay in their file " + mapping_->path() + ", not in a float32 matrix");
    }
    if (type_ != StoredType::f32) {
        throw Error(std::string("the points are held as ") + stored_type_name(type_) + ", not float32");
    }
    return floats_;
}

}  // namespace vlattice
