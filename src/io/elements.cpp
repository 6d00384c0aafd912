#include "io/elements.hpp"

#include "numeric.hpp"

#include <cstring>

namespace vlattice::io {

// In the x86-64-v3 copy the compiler converts with F16C, eight values an instruction; the default
// copy calls libgcc's software conversion, one value at a time. Both are exact.
VLATTICE_ALSO_FOR_X86_64_V3
void widen(const Half* source, std::size_t count, float* destination) {
    for (std::size_t i = 0; i < count; ++i) {
        destination[i] = half_to_float(source[i].bits);
    }
}

namespace {

// f(T{}) for the C++ type of `type`.
template <class F>
void with_element(ElementType type, F f) {
    switch (type) {
    case ElementType::f32:
        return f(float{});
    case ElementType::f64:
        return f(double{});
    case ElementType::f16:
        return f(Half{});
    case ElementType::u8:
        return f(std::uint8_t{});
    case ElementType::i8:
        return f(std::int8_t{});
    case ElementType::i32:
        return f(std::int32_t{});
    }
}

// `count` values of T from `raw` as float32, the first the value at `index` of the array (for the
// position a narrowing error names).
template <class T>
void convert(const char* raw, std::size_t count, std::uint64_t index, std::size_t cols, float* out,
             const std::string& path) {
    if constexpr (std::is_same_v<T, double>) {
        narrow(reinterpret_cast<const double*>(raw), count, index, cols, out, path);
    } else {
        widen(reinterpret_cast<const T*>(raw), count, out);
    }
}

// Row `row`'s values from its raw bytes as float32: after its dimension, checked, where the layout
// puts one first; copied out to aligned storage where they do not start the row.
template <class T>
void convert_row(const ArrayLayout& layout, const char* raw, std::uint64_t row, std::vector<T>& staging, float* out,
                 const std::string& path) {
    if (layout.dimension_first) {
        check_row_dimension(raw, row, layout.cols, path);
        std::memcpy(staging.data(), raw + layout.value_offset(), layout.cols * sizeof(T));
        raw = reinterpret_cast<const char*>(staging.data());
    }
    convert<T>(raw, layout.cols, row * layout.cols, layout.cols, out, path);
}

}  // namespace

void throw_dimension_mismatch(const std::string& path, std::uint64_t row, std::int32_t got, std::size_t cols) {
    throw Error(path + ": row " + std::to_string(row) + " has dimension " + std::to_string(got) + ", expected " +
                std::to_string(cols) + " (the dimension of row 0)");
}

void check_row_dimension(const char* raw, std::uint64_t row, std::size_t cols, const std::string& path) {
    std::int32_t got = 0;
    std::memcpy(&got, raw, sizeof got);
    if (got < 0 || static_cast<std::size_t>(got) != cols) {
        throw_dimension_mismatch(path, row, got, cols);
    }
}

void rethrow_first(const std::vector<std::exception_ptr>& failures) {
    for (const std::exception_ptr& failure : failures) {
        if (failure) {
            std::rethrow_exception(failure);
        }
    }
}

std::size_t element_bytes(ElementType type) {
    std::size_t bytes = 0;
    with_element(type, [&](auto value) { bytes = sizeof value; });
    return bytes;
}

void read_array_rows(const BinaryFile& file, const ArrayLayout& layout, std::size_t first, std::size_t count, float* out,
                     const ReadProgress& progress) {
    const std::size_t cols = layout.cols;
    with_element(layout.type, [&](auto value) {
        using T = decltype(value);
        const std::size_t row_bytes = layout.row_bytes();
        read_row_blocks(file, layout.offset + static_cast<std::uint64_t>(first) * row_bytes, count, row_bytes,
                        "the vectors", progress, count, [&](const char* raw, std::size_t r, std::size_t rows) {
                            if (!layout.dimension_first) {
                                convert<T>(raw, rows * cols, (first + r) * cols, cols, out + r * cols, file.path());
                                return;
                            }
                            std::vector<T> staging(cols);
                            for (std::size_t i = 0; i < rows; ++i) {
                                convert_row<T>(layout, raw + i * row_bytes, first + r + i, staging,
                                               out + (r + i) * cols, file.path());
                            }
                        });
    });
}

Matrix read_array(const BinaryFile& file, const ArrayLayout& layout, const ReadProgress& progress) {
    Matrix points = allocate_table<Matrix>(file.path(), layout.rows, layout.cols);
    read_array_rows(file, layout, 0, layout.rows, points.data.data(), progress);
    return points;
}

std::optional<StoredType> stored_type_of(ElementType type) {
    switch (type) {
    case ElementType::f32:
        return StoredType::f32;
    case ElementType::f16:
        return StoredType::f16;
    case ElementType::u8:
        return StoredType::u8;
    case ElementType::i8:
        return StoredType::i8;
    case ElementType::f64:
    case ElementType::i32:
        break;
    }
    return std::nullopt;
}

std::string unmappable_reason(const ArrayLayout& layout) {
    if (!stored_type_of(layout.type)) {
        return std::string("its ") + (layout.type == ElementType::f64 ? "float64" : "int32") +
               " values are converted to float32 as they are read (float32, float16, uint8 or int8 values can be "
               "read in place)";
    }
    return "";
}

PointSet map_stored_array(const BinaryFile& file, const ArrayLayout& layout, std::size_t resident_limit,
                          const ReadProgress& progress) {
    if (layout.dimension_first) {
        // Each row's dimension is checked once, by reads beside the mapping (the page cache's, not
        // the process's memory), as a whole read checks it.
        read_row_blocks(file, layout.offset, layout.rows, layout.row_bytes(), "the rows' dimensions", progress,
                        layout.rows, [&](const char* raw, std::size_t first, std::size_t rows) {
                            for (std::size_t i = 0; i < rows; ++i) {
                                check_row_dimension(raw + i * layout.row_bytes(), first + i, layout.cols,
                                                    file.path());
                            }
                        });
    }
    return PointSet::mapped(file.path(), layout.offset, *stored_type_of(layout.type), layout.rows, layout.cols,
                            resident_limit, layout.value_offset());
}

PointSet read_stored_array(const BinaryFile& file, const ArrayLayout& layout, const ReadProgress& progress) {
    const std::optional<StoredType> stored = stored_type_of(layout.type);
    if (!stored || *stored == StoredType::f32) {
        return PointSet(read_array(file, layout, progress));
    }
    const StoredType type = *stored;
    const std::size_t cols = layout.cols;
    const std::size_t value_bytes = cols * element_bytes(layout.type);
    check_memory(file.path() + ": " + count_text(layout.rows) + " x " + count_text(cols) + " " + stored_type_name(type),
                 table_bytes(layout.rows, cols, element_bytes(layout.type)));
    PointSet points = PointSet::unset(type, layout.rows, cols);
    auto* out = static_cast<char*>(points.values());
    const std::size_t row_bytes = layout.row_bytes();
    read_row_blocks(file, layout.offset, layout.rows, row_bytes, "the vectors", progress, layout.rows,
                    [&](const char* raw, std::size_t first, std::size_t rows) {
                        if (!layout.dimension_first) {
                            std::memcpy(out + first * value_bytes, raw, rows * value_bytes);
                            return;
                        }
                        for (std::size_t i = 0; i < rows; ++i) {
                            check_row_dimension(raw + i * row_bytes, first + i, cols, file.path());
                            std::memcpy(out + (first + i) * value_bytes, raw + i * row_bytes + layout.value_offset(),
                                        value_bytes);
                        }
                    });
    return points;
}

void read_array_selection(const BinaryFile& file, const ArrayLayout& layout, const std::vector<std::uint32_t>& rows,
                          float* out) {
    const std::size_t cols = layout.cols;
    with_element(layout.type, [&](auto value) {
        using T = decltype(value);
        const std::size_t row_bytes = layout.row_bytes();
        constexpr std::size_t kRowsPerBlock = 4096;
        const std::size_t blocks = (rows.size() + kRowsPerBlock - 1) / kRowsPerBlock;
        std::vector<std::exception_ptr> failures(blocks);
#pragma omp parallel if (blocks > 1)
        {
            std::vector<char> raw(row_bytes);
            std::vector<T> staging(cols);
#pragma omp for schedule(dynamic, 1)
            for (std::size_t b = 0; b < blocks; ++b) {
                try {
                    for (std::size_t s = b * kRowsPerBlock; s < std::min(rows.size(), (b + 1) * kRowsPerBlock); ++s) {
                        const std::uint64_t at = layout.offset + static_cast<std::uint64_t>(rows[s]) * row_bytes;
                        file.read_at(at, raw.data(), row_bytes, "row " + std::to_string(rows[s]));
                        convert_row<T>(layout, raw.data(), rows[s], staging, out + s * cols, file.path());
                    }
                } catch (...) {
                    failures[b] = std::current_exception();
                }
            }
        }
        rethrow_first(failures);
    });
}

}  // namespace vlattice::io
