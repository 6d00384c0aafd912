// The element types vector files store, and reading them into float32 rows (or int64 ids). Widening is a plain
// loop the compiler vectorises, narrowing float64 one that also checks the range; a staging buffer
// per thread keeps memory at the matrix plus a few MiB a thread.
#pragma once

#include "io/binary_file.hpp"
#include "vlattice/half.hpp"
#include "vlattice/io.hpp"
#include "vlattice/memory.hpp"
#include "vlattice/point_set.hpp"
#include "vlattice/types.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <exception>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <omp.h>

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

// A rows x cols Table (Matrix, or IdMatrix for ids), once it is known to fit the memory a run can
// have: a header or a compressed dataset may promise far more than the file's size. A Matrix comes
// with its values unset, for the reader to write every one (from several threads, each touching its
// own pages first); ids come zeroed.
template <class Table>
Table allocate_table(const std::string& where, std::uint64_t rows, std::uint64_t cols) {
    using Value = typename decltype(Table::data)::value_type;
    const char* type = std::is_same_v<Value, float> ? "float32" : "int64 ids";
    check_memory(where + ": " + count_text(rows) + " x " + count_text(cols) + " " + type,
                 table_bytes(rows, cols, sizeof(Value)));
    if constexpr (std::is_same_v<Table, Matrix>) {
        return Matrix::unset(rows, cols);
    } else {
        return Table(rows, cols);
    }
}

template <typename T>
void widen(const T* source, std::size_t count, float* destination) {
    for (std::size_t i = 0; i < count; ++i) {
        destination[i] = to_float(source[i]);
    }
}

// float16 through F16C where the CPU has it (the same values: the conversion is exact).
void widen(const Half* source, std::size_t count, float* destination);

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

// Rethrows the first exception held (the lowest block's), if any.
void rethrow_first(const std::vector<std::exception_ptr>& failures);

// Reads `rows` rows of `row_bytes` bytes each, the first at byte `offset` of the file, in blocks of
// about kStagingBytes on the OpenMP threads: each thread reads its blocks with pread into a staging
// buffer of its own and hands them to take(raw, first_row, count), which must only write the rows
// it is given. Reading and converting so overlap, and a file in the page cache is read at memory
// speed rather than at one core's conversion speed. An Error from take or from the read is
// rethrown for the lowest block that raised one, so the message names the first bad row as a
// serial read would. progress, when set, is called from one thread only; it counts `vectors`
// vectors in all (the rows here may be blocks of values rather than vectors).
template <typename Take>
void read_row_blocks(const BinaryFile& file, std::uint64_t offset, std::size_t rows, std::size_t row_bytes,
                     const std::string& what, const ReadProgress& progress, std::uint64_t vectors, Take take) {
    const std::size_t rows_per_block = std::max<std::size_t>(1, kStagingBytes / row_bytes);
    const std::size_t blocks = (rows + rows_per_block - 1) / rows_per_block;
    const std::uint64_t total = static_cast<std::uint64_t>(rows) * row_bytes;
    std::vector<std::exception_ptr> failures(blocks);
    std::atomic<bool> failed{false};
    std::atomic<std::uint64_t> done{0};
#pragma omp parallel if (blocks > 1)
    {
        std::vector<char> staging;
#pragma omp for schedule(dynamic, 1)
        for (std::size_t b = 0; b < blocks; ++b) {
            if (failed.load(std::memory_order_relaxed)) {
                continue;
            }
            try {
                const std::size_t first = b * rows_per_block;
                const std::size_t count = std::min(rows_per_block, rows - first);
                staging.resize(rows_per_block * row_bytes);
                const std::uint64_t at = offset + static_cast<std::uint64_t>(first) * row_bytes;
                file.read_at(at, staging.data(), count * row_bytes, what + " at byte " + std::to_string(at));
                take(staging.data(), first, count);
                const std::uint64_t now = done.fetch_add(count * row_bytes) + count * row_bytes;
                if (progress && omp_get_thread_num() == 0) {
                    progress({now, total, vectors});
                }
            } catch (...) {
                failures[b] = std::current_exception();
                failed.store(true, std::memory_order_relaxed);
            }
        }
    }
    rethrow_first(failures);
    if (progress) {
        progress({total, total, vectors});
    }
}

// Reads `count` values of T, contiguous from the file's current position, into `destination` (int64
// ids, through widen). The position moves past them.
template <typename T, typename Out>
void read_as(BinaryFile& file, std::size_t count, Out* destination, const std::string& what) {
    // Blocks of whole values: a "row" here is kValues values, the last block's shorter.
    constexpr std::size_t kValues = 1024;
    const std::size_t whole = count / kValues;
    const std::uint64_t start = file.position();
    read_row_blocks(file, start, whole, kValues * sizeof(T), what, {}, whole,
                    [&](const char* raw, std::size_t first, std::size_t rows) {
                        widen(reinterpret_cast<const T*>(raw), rows * kValues, destination + first * kValues);
                    });
    const std::size_t rest = count - whole * kValues;
    if (rest > 0) {
        std::vector<T> tail(rest);
        file.read_at(start + static_cast<std::uint64_t>(whole) * kValues * sizeof(T), tail.data(), rest * sizeof(T),
                     what);
        widen(tail.data(), rest, destination + whole * kValues);
    }
    file.skip(static_cast<std::uint64_t>(count) * sizeof(T));
}


// The element types of the vector arrays read by rows.
enum class ElementType { f32, f64, f16, u8, i8, i32 };

std::size_t element_bytes(ElementType type);

// Where an array of vectors lies in a file (.npy, big-ann, TEXMEX): rows of cols values of `type`,
// one after the other from byte `offset`, their sizes already checked against the file's. A TEXMEX
// row starts with its dimension as an int32, which each read checks against cols.
struct ArrayLayout {
    std::uint64_t offset = 0;
    std::size_t rows = 0;
    std::size_t cols = 0;
    ElementType type = ElementType::f32;
    bool dimension_first = false;

    std::size_t value_offset() const { return dimension_first ? sizeof(std::int32_t) : 0; }
    std::size_t row_bytes() const { return value_offset() + cols * element_bytes(type); }
};

// "PATH: row R has dimension GOT, expected COLS (the dimension of row 0)", a TEXMEX row's Error.
[[noreturn]] void throw_dimension_mismatch(const std::string& path, std::uint64_t row, std::int32_t got,
                                           std::size_t cols);
// Throws that Error unless the int32 at `raw`, row `row`'s leading dimension, is `cols`.
void check_row_dimension(const char* raw, std::uint64_t row, std::size_t cols, const std::string& path);

// Rows [first, first + count) of the array as float32 into `out` (count x cols), in blocks on the
// threads (read_row_blocks). float64 is narrowed, naming the row and the column of a value beyond
// float32's range.
void read_array_rows(const BinaryFile& file, const ArrayLayout& layout, std::size_t first, std::size_t count, float* out,
                     const ReadProgress& progress);

// Every row of the array, as float32.
Matrix read_array(const BinaryFile& file, const ArrayLayout& layout, const ReadProgress& progress);

// Every row of the array in its own type where a PointSet holds that type (float16, uint8, int8;
// float32 too), else (float64, int32) as float32, as read_array reads it.
PointSet read_stored_array(const BinaryFile& file, const ArrayLayout& layout, const ReadProgress& progress);

// The type a PointSet holds `type` in as it is (float16, uint8, int8, float32), else nullopt
// (float64 and int32, which are converted as they are read).
std::optional<StoredType> stored_type_of(ElementType type);

// Why the rows of `layout` cannot be read in place from their file, as a phrase; empty when they
// can (values of a stored type).
std::string unmappable_reason(const ArrayLayout& layout);

// The rows of `layout` in place in `file`, mapped (PointSet::mapped) with `resident_limit` bytes
// resident; unmappable_reason(layout) must be empty. TEXMEX rows, each after its dimension, are
// mapped a row's length apart, once a read of the file (its progress reported) has checked every
// row's dimension.
PointSet map_stored_array(const BinaryFile& file, const ArrayLayout& layout, std::size_t resident_limit,
                          const ReadProgress& progress);

// The listed rows (increasing) of the array as float32 into `out` (rows.size() x cols), each read on
// its own, on the threads: a sample of a file without reading the rest.
void read_array_selection(const BinaryFile& file, const ArrayLayout& layout, const std::vector<std::uint32_t>& rows,
                          float* out);

}  // namespace vlattice::io
