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

[[noreturn]] void throw_dimension_mismatch(const std::string& path, std::uint64_t row, Dimension got,
                                           Dimension expected) {
    throw Error(path + ": row " + std::to_string(row) + " has dimension " + std::to_string(got) + ", expected " +
                std::to_string(expected) + " (the dimension of row 0)");
}

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
            throw_dimension_mismatch(file.path(), row, got, dim);
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

// Table is Matrix (vectors) or IdMatrix (ids).
template <typename T, typename Table = Matrix>
Table read_texmex(const std::string& path, const ReadProgress& progress) {
    BinaryFile file(path);
    Dimension dim = 0;
    file.read_at(0, &dim, sizeof dim, "row 0's dimension");
    if (dim <= 0) {
        throw Error(path + ": row 0 has dimension " + std::to_string(dim) +
                    "; a dimension must be positive (is the extension right?)");
    }
    const std::uint64_t row_bytes = sizeof(Dimension) + static_cast<std::uint64_t>(dim) * sizeof(T);
    if (file.size() % row_bytes != 0) {
        throw_truncated_or_mismatch(file, dim, row_bytes);
    }
    const std::size_t rows = file.size() / row_bytes;
    const std::size_t cols = static_cast<std::size_t>(dim);

    Table points = allocate_table<Table>(path, rows, cols);
    read_row_blocks(file, 0, rows, row_bytes, "the rows", progress, rows,
                    [&](const char* raw_rows, std::size_t first, std::size_t count) {
                        // Values sit 4 bytes into each row, so they are copied out rather than read in place.
                        std::vector<T> values(cols);
                        for (std::size_t i = 0; i < count; ++i) {
                            const char* raw = raw_rows + i * row_bytes;
                            Dimension got = 0;
                            std::memcpy(&got, raw, sizeof got);
                            if (got != dim) {
                                throw_dimension_mismatch(path, first + i, got, dim);
                            }
                            std::memcpy(values.data(), raw + sizeof(Dimension), cols * sizeof(T));
                            widen(values.data(), cols, points.row(first + i));
                        }
                    });
    return points;
}

}  // namespace

Matrix read_fvecs(const std::string& path, const ReadProgress& progress) {
    return read_texmex<float>(path, progress);
}

Matrix read_bvecs(const std::string& path, const ReadProgress& progress) {
    return read_texmex<std::uint8_t>(path, progress);
}

Matrix read_ivecs(const std::string& path, const ReadProgress& progress) {
    return read_texmex<std::int32_t>(path, progress);
}

IdMatrix read_ivecs_ids(const std::string& path) {
    return read_texmex<std::int32_t, IdMatrix>(path, {});
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
