#include "io/texmex.hpp"

#include "io/binary_file.hpp"
#include "io/elements.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

namespace vlattice::io {

namespace {

using Dimension = std::int32_t;

// A file whose length is not a whole number of rows is either cut short or has a row of another
// dimension somewhere; walking the row headers tells which, so the message can name the row.
void throw_truncated_or_mismatch(BinaryFile& file, Dimension dim, std::uint64_t row_bytes) {
    const std::uint64_t whole_rows = file.size() / row_bytes;
    for (std::uint64_t row = 1; row <= whole_rows; ++row) {
        const std::uint64_t offset = row * row_bytes;
        if (offset + sizeof(Dimension) > file.size()) {
            break;
        }
        Dimension got = 0;
        file.read_at(offset, &got, sizeof got, "row " + std::to_string(row) + "'s dimension");
        if (got != dim) {
            throw_dimension_mismatch(file.path(), row, got, static_cast<std::size_t>(dim));
        }
    }
    if (whole_rows == 0) {
        throw Error(file.path() + ": truncated: row 0 declares dimension " + std::to_string(dim) + ", which needs " +
                    std::to_string(row_bytes) + " bytes, but the file has only " + std::to_string(file.size()));
    }
    throw Error(file.path() + ": truncated: row " + std::to_string(whole_rows) + " has " +
                std::to_string(file.size() % row_bytes) + " of its " + std::to_string(row_bytes) +
                " bytes (dimension " + std::to_string(dim) + ")");
}

Matrix read_vectors_of(const std::string& path, ElementType type, const ReadProgress& progress) {
    BinaryFile file(path);
    return read_array(file, texmex_layout(file, type), progress);
}

}  // namespace

ArrayLayout texmex_layout(BinaryFile& file, ElementType type) {
    Dimension dim = 0;
    file.read_at(0, &dim, sizeof dim, "row 0's dimension");
    if (dim <= 0) {
        throw Error(file.path() + ": row 0 has dimension " + std::to_string(dim) +
                    "; a dimension must be positive (is the extension right?)");
    }
    ArrayLayout layout;
    layout.cols = static_cast<std::size_t>(dim);
    layout.type = type;
    layout.dimension_first = true;
    if (file.size() % layout.row_bytes() != 0) {
        throw_truncated_or_mismatch(file, dim, layout.row_bytes());
    }
    layout.rows = file.size() / layout.row_bytes();
    return layout;
}

Matrix read_fvecs(const std::string& path, const ReadProgress& progress) {
    return read_vectors_of(path, ElementType::f32, progress);
}

Matrix read_bvecs(const std::string& path, const ReadProgress& progress) {
    return read_vectors_of(path, ElementType::u8, progress);
}

Matrix read_ivecs(const std::string& path, const ReadProgress& progress) {
    return read_vectors_of(path, ElementType::i32, progress);
}

IdMatrix read_ivecs_ids(const std::string& path) {
    BinaryFile file(path);
    const ArrayLayout layout = texmex_layout(file, ElementType::i32);
    IdMatrix ids = allocate_table<IdMatrix>(path, layout.rows, layout.cols);
    const std::size_t row_bytes = layout.row_bytes();
    read_row_blocks(file, 0, layout.rows, row_bytes, "the rows", {}, layout.rows,
                    [&](const char* raw_rows, std::size_t first, std::size_t count) {
                        std::vector<std::int32_t> values(layout.cols);
                        for (std::size_t i = 0; i < count; ++i) {
                            const char* raw = raw_rows + i * row_bytes;
                            check_row_dimension(raw, first + i, layout.cols, path);
                            std::memcpy(values.data(), raw + sizeof(Dimension), layout.cols * sizeof(std::int32_t));
                            widen(values.data(), layout.cols, ids.row(first + i));
                        }
                    });
    return ids;
}

void write_fvecs(std::ostream& out, const std::string& name, const Matrix& points) {
    if (points.cols > static_cast<std::size_t>(std::numeric_limits<Dimension>::max())) {
        throw Error(name + ": dimension " + std::to_string(points.cols) + " does not fit a .fvecs row header");
    }
    const Dimension dim = static_cast<Dimension>(points.cols);
    for (std::size_t i = 0; i < points.rows; ++i) {
        out.write(reinterpret_cast<const char*>(&dim), sizeof dim);
        out.write(reinterpret_cast<const char*>(points.row(i)), static_cast<std::streamsize>(points.cols * sizeof(float)));
    }
}

}  // namespace vlattice::io
