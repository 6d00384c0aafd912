// The public entry points of include/vlattice/io.hpp: pick the format by name or else by extension,
// then hand over to the reader or writer for that format.
#include "vlattice/io.hpp"

#include "io/bigann.hpp"
#include "io/elements.hpp"
#include "io/binary_file.hpp"
#include "io/hdf5.hpp"
#include "io/hdf5_writer.hpp"
#include "io/ids.hpp"
#include "io/npy.hpp"
#include "io/texmex.hpp"

#include "vlattice/atomic_file.hpp"
#include "vlattice/memory.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>

namespace vlattice {

namespace {

constexpr const char* kReadable = ".fvecs .bvecs .ivecs .fbin .u8bin .i8bin .npy .h5 .hdf5";
constexpr const char* kWritable = ".fvecs .fbin .npy .h5 .hdf5";

std::string lower(std::string text) {
    std::transform(text.begin(), text.end(), text.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return text;
}

// The extension that decides the format: `format` (npy, or .npy) when given, else the path's own,
// lower-cased, so that DATA.FVECS reads like data.fvecs.
std::string extension_of(const std::string& path, const std::string& format = {}) {
    if (!format.empty()) {
        const std::string named = lower(format);
        return named.front() == '.' ? named : "." + named;
    }
    return lower(std::filesystem::path(path).extension().string());
}

bool is_hdf5_extension(const std::string& extension) {
    return extension == ".h5" || extension == ".hdf5";
}

[[noreturn]] void throw_unsupported(const std::string& path, const std::string& format, const char* supported) {
    if (!format.empty()) {
        std::string names = supported;
        names.erase(std::remove(names.begin(), names.end(), '.'), names.end());
        throw Error(path + ": unknown format '" + format + "'; supported: " + names);
    }
    const std::string extension = extension_of(path);
    const std::string problem =
        extension.empty() ? "no file extension to tell the format by" : "unsupported extension '" + extension + "'";
    throw Error(path + ": " + problem + "; supported: " + supported);
}

enum class WrittenFormat { fvecs, fbin, npy, hdf5 };

WrittenFormat written_format(const std::string& path, const std::string& format) {
    const std::string extension = extension_of(path, format);
    if (extension == ".fvecs") {
        return WrittenFormat::fvecs;
    }
    if (extension == ".fbin") {
        return WrittenFormat::fbin;
    }
    if (extension == ".npy") {
        return WrittenFormat::npy;
    }
    if (is_hdf5_extension(extension)) {
        return WrittenFormat::hdf5;
    }
    throw_unsupported(path, format, kWritable);
}

void require_vectors(const std::string& name, const Matrix& points) {
    if (points.rows == 0 || points.cols == 0) {
        throw Error(name + ": no vectors to write (" + std::to_string(points.rows) + " x " +
                    std::to_string(points.cols) + ")");
    }
}

[[noreturn]] void throw_hdf5_stream(const std::string& name) {
    throw Error(name + ": HDF5 cannot be written to a stream (the library seeks in its file); write npy, fvecs or "
                "fbin, or name a file");
}

// The formats that are written front to back, and so also to a pipe.
void write_stream(WrittenFormat format, std::ostream& out, const std::string& name, const Matrix& points) {
    switch (format) {
    case WrittenFormat::fvecs:
        io::write_fvecs(out, name, points);
        return;
    case WrittenFormat::fbin:
        io::write_fbin(out, name, points);
        return;
    case WrittenFormat::npy:
        io::write_npy(out, points);
        return;
    case WrittenFormat::hdf5:
        break;
    }
    throw_hdf5_stream(name);
}

}  // namespace

namespace {

bool is_array_extension(const std::string& extension) {
    return extension == ".npy" || extension == ".fbin" || extension == ".u8bin" || extension == ".i8bin" ||
           extension == ".fvecs" || extension == ".bvecs" || extension == ".ivecs";
}

// Where the vectors of an array format (is_array_extension) lie in `file`, its header checked.
io::ArrayLayout array_layout(io::BinaryFile& file, const std::string& extension) {
    if (extension == ".npy") {
        return io::npy_layout(file);
    }
    if (extension == ".fvecs" || extension == ".bvecs" || extension == ".ivecs") {
        const io::ElementType type = extension == ".fvecs"   ? io::ElementType::f32
                                     : extension == ".bvecs" ? io::ElementType::u8
                                                             : io::ElementType::i32;
        return io::texmex_layout(file, type);
    }
    const io::ElementType type = extension == ".fbin"    ? io::ElementType::f32
                                 : extension == ".u8bin" ? io::ElementType::u8
                                                         : io::ElementType::i8;
    return io::bigann_layout(file, type);
}

class ArrayRows final : public VectorRows {
public:
    ArrayRows(const std::string& path, const std::string& extension) : file_(path) {
        layout_ = array_layout(file_, extension);
    }
    // Values that another reader (libhdf5) found at a place in the file, its sizes checked.
    ArrayRows(const std::string& path, const io::ArrayLayout& layout) : file_(path), layout_(layout) {}

    std::size_t rows() const override { return layout_.rows; }
    std::size_t cols() const override { return layout_.cols; }

    void read_range(std::size_t first, std::size_t count, Matrix& into) const override {
        if (first > layout_.rows || count > layout_.rows - first) {
            throw Error(file_.path() + ": rows " + std::to_string(first) + " to " + std::to_string(first + count) +
                        " asked of " + std::to_string(layout_.rows));
        }
        into.rows = count;
        into.cols = layout_.cols;
        into.data.resize(count * layout_.cols);
        io::read_array_rows(file_, layout_, first, count, into.data.data(), {});
    }

    Matrix selection(const std::vector<std::uint32_t>& rows) const override {
        if (!std::is_sorted(rows.begin(), rows.end()) || (!rows.empty() && rows.back() >= layout_.rows)) {
            throw Error(file_.path() + ": a selection of rows must be increasing and below " +
                        std::to_string(layout_.rows));
        }
        Matrix out = io::allocate_table<Matrix>(file_.path(), rows.size(), layout_.cols);
        io::read_array_selection(file_, layout_, rows, out.data.data());
        return out;
    }

private:
    io::BinaryFile file_;
    io::ArrayLayout layout_;
};

}  // namespace

std::unique_ptr<VectorRows> open_vector_rows(const std::string& path, const ReadOptions& options) {
    const std::string extension = extension_of(path, options.format);
    if (is_array_extension(extension)) {
        return std::make_unique<ArrayRows>(path, extension);
    }
    if (is_hdf5_extension(extension)) {
        const io::Hdf5Placement place = io::hdf5_placement(path, options.dataset);
        return place.layout ? std::make_unique<ArrayRows>(place.file, *place.layout) : nullptr;
    }
    return nullptr;
}

namespace {

// Points that take more than --memory, in place in their file where `reason` is empty (`layout`
// there, in `file`); refused where it is not and SIZE was given; nullopt: read them whole.
std::optional<PointSet> map_beyond_memory(const std::string& name, const std::string& file,
                                          const io::ArrayLayout* layout, std::uint64_t bytes,
                                          const std::string& reason, const ReadOptions& options) {
    if (options.memory == 0 || bytes <= options.memory) {
        return std::nullopt;
    }
    if (reason.empty()) {
        return io::map_stored_array(io::BinaryFile(file), *layout, static_cast<std::size_t>(options.memory),
                                    options.progress);
    }
    if (!options.memory_given) {
        return std::nullopt;
    }
    throw Error(name + ": its points take " + byte_size_text(bytes) + ", more than --memory's " +
                byte_size_text(options.memory) + ", and its rows cannot be read in place from the file: " + reason);
}

}  // namespace

PointSet read_stored_points(const std::string& path, const ReadOptions& options) {
    const std::string extension = extension_of(path, options.format);
    if (is_hdf5_extension(extension)) {
        const io::Hdf5Placement place = io::hdf5_placement(path, options.dataset);
        if (std::optional<PointSet> mapped =
                map_beyond_memory(path + ": dataset '" + options.dataset + "'", place.file,
                                  place.layout ? &*place.layout : nullptr, place.bytes, place.reason, options)) {
            return std::move(*mapped);
        }
        return io::read_hdf5_points(path, options.dataset, options.progress);
    }
    if (!is_array_extension(extension)) {
        throw_unsupported(path, options.format, kReadable);
    }
    io::BinaryFile file(path);
    const io::ArrayLayout layout = array_layout(file, extension);
    const std::optional<StoredType> stored = io::stored_type_of(layout.type);
    const std::uint64_t bytes =
        table_bytes(layout.rows, layout.cols, stored ? stored_type_bytes(*stored) : sizeof(float));
    if (std::optional<PointSet> mapped =
            map_beyond_memory(path, path, &layout, bytes, io::unmappable_reason(layout), options)) {
        return std::move(*mapped);
    }
    return io::read_stored_array(file, layout, options.progress);
}

bool is_hdf5_path(const std::string& path) {
    return is_hdf5_extension(extension_of(path));
}

Matrix read_vectors(const std::string& path, const ReadOptions& options) {
    const std::string extension = extension_of(path, options.format);
    if (extension == ".fvecs") {
        return io::read_fvecs(path, options.progress);
    }
    if (extension == ".bvecs") {
        return io::read_bvecs(path, options.progress);
    }
    if (extension == ".ivecs") {
        return io::read_ivecs(path, options.progress);
    }
    if (extension == ".fbin") {
        return io::read_fbin(path, options.progress);
    }
    if (extension == ".u8bin") {
        return io::read_u8bin(path, options.progress);
    }
    if (extension == ".i8bin") {
        return io::read_i8bin(path, options.progress);
    }
    if (extension == ".npy") {
        return io::read_npy(path, options.progress);
    }
    if (is_hdf5_extension(extension)) {
        return io::read_hdf5(path, options.dataset, options.progress);
    }
    throw_unsupported(path, options.format, kReadable);
}

void check_input_format(const std::string& format) {
    const std::string extension = extension_of("", format);
    const std::string readable = std::string(kReadable) + " ";
    if (format.empty() || readable.find(extension + " ") == std::string::npos) {
        throw_unsupported("--input-format", format.empty() ? "(empty)" : format, kReadable);
    }
}

void check_input_file(const std::string& path) {
    io::nonempty_file_size(path);
}

IdMatrix read_ids(const std::string& path, const ReadOptions& options) {
    const std::string extension = extension_of(path);
    if (extension == ".ivecs") {
        return io::read_ivecs_ids(path);
    }
    if (extension == ".npy") {
        return io::read_npy_ids(path);
    }
    if (is_hdf5_extension(extension)) {
        return io::read_hdf5_ids(path, options.dataset);
    }
    return io::whole_ids(read_vectors(path, options), path);
}

bool has_hdf5_dataset(const std::string& path, const std::string& dataset) {
    return io::has_hdf5_dataset(path, dataset);
}

std::optional<Metric> input_metric(const std::string& path, const std::string& format) {
    if (!is_hdf5_extension(extension_of(path, format))) {
        return std::nullopt;
    }
    const std::string distance = io::read_hdf5_text_attribute(path, "distance");
    if (distance.empty()) {
        return std::nullopt;
    }
    if (distance == "euclidean") {
        return Metric::l2;
    }
    if (distance == "angular") {
        return Metric::angular;
    }
    if (distance == "ip" || distance == "dot") {
        return Metric::ip;
    }
    throw Error(path + ": attribute 'distance' is '" + distance +
                "'; vlattice handles euclidean, angular and ip or dot (choose one with --metric)");
}

namespace {

// Whether any of `count` values holds an all-ones exponent (Inf or NaN): flags or-ed together
// vectorise.
template <class Bits>
bool any_not_finite(const Bits* values, std::size_t count, Bits exponent) {
    std::uint32_t found = 0;
    for (std::size_t e = 0; e < count; ++e) {
        found |= static_cast<std::uint32_t>((values[e] & exponent) == exponent);
    }
    return found != 0;
}

}  // namespace

void check_finite(const PointView& points, const std::string& path, std::size_t first_row) {
    if (points.type() != StoredType::f32 && points.type() != StoredType::f16) {
        return;  // 8-bit values are always finite
    }
    const auto scan = [&](const char* raw, std::size_t count) {
        return points.type() == StoredType::f32
                   ? any_not_finite(reinterpret_cast<const std::uint32_t*>(raw), count, std::uint32_t{0x7f800000u})
                   : any_not_finite(reinterpret_cast<const std::uint16_t*>(raw), count, std::uint16_t{0x7c00u});
    };
    // Blocks of about 64 Ki values on the threads, each reported as read just before it is scanned,
    // so that a mapping counts what the scan makes resident while it can still give it back.
    const std::size_t rows_per_block =
        std::max<std::size_t>(1, (std::size_t{1} << 16) / std::max<std::size_t>(points.cols, 1));
    const std::size_t blocks = (points.rows + rows_per_block - 1) / rows_per_block;
    int any = 0;
#pragma omp parallel for schedule(static) reduction(| : any) if (blocks > 1)
    for (std::size_t b = 0; b < blocks; ++b) {
        const std::size_t first = b * rows_per_block;
        const std::size_t rows = std::min(rows_per_block, points.rows - first);
        const char* raw = points.raw_rows(first, rows);
        if (points.contiguous()) {
            any |= scan(raw, rows * points.cols) ? 1 : 0;
            continue;
        }
        for (std::size_t r = 0; r < rows; ++r) {
            any |= scan(raw + r * points.pitch(), points.cols) ? 1 : 0;
        }
    }
    if (any == 0) {
        return;
    }
    // Only a set that holds one is searched again, in order, for the first.
    std::vector<float> scratch(points.cols);
    for (std::size_t i = 0; i < points.rows; ++i) {
        const float* row = points.row(i, scratch.data());
        for (std::size_t k = 0; k < points.cols; ++k) {
            if (!std::isfinite(row[k])) {
                const char* what = std::isnan(row[k]) ? "NaN" : row[k] > 0 ? "Inf" : "-Inf";
                throw Error(path + ": row " + std::to_string(first_row + i) + " (0-based), column " + std::to_string(k) +
                            " (0-based) is " + what + "; vectors must be finite");
            }
        }
    }
}

void check_vectors_output(const std::string& path, const std::string& format, bool stream) {
    if (written_format(path, format) == WrittenFormat::hdf5 && stream) {
        throw_hdf5_stream(path);
    }
}

void write_vectors(const std::string& path, const Matrix& points, const std::string& format) {
    const WrittenFormat chosen = written_format(path, format);
    require_vectors(path, points);
    if (chosen == WrittenFormat::hdf5) {
        io::Hdf5Writer file(path);
        file.dataset(kWrittenHdf5Dataset, H5T_NATIVE_FLOAT, {points.rows, points.cols}, points.data.data());
        file.commit();
        return;
    }
    AtomicFile file(path);
    write_stream(chosen, file.stream(), path, points);
    file.commit();
}

void write_vectors(std::ostream& out, const std::string& name, const Matrix& points, const std::string& format) {
    const WrittenFormat chosen = written_format(name, format);
    require_vectors(name, points);
    write_stream(chosen, out, name, points);
    out.flush();
    if (!out) {
        throw Error(name + ": write failed (a closed pipe, a full disk or an I/O error)");
    }
}

}  // namespace vlattice
