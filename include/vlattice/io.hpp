// Vector file readers and writers. The format is chosen by the file's extension, or by a format
// named the same way without the dot (npy), which a stream with no name to go by needs:
//   .fvecs .bvecs .ivecs (TEXMEX)   .fbin .u8bin .i8bin (big-ann)
//   .npy (float32, float64, float16, uint8, int8; C order)
//   .h5 .hdf5 (one dataset by name)
// Every reader checks the sizes its header promises against the file's length before it allocates,
// and every error names the file (and the row or field where there is one).
#pragma once

#include "vlattice/point_set.hpp"
#include "vlattice/types.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace vlattice {

// Where a read stands: the bytes of vectors read so far and in all, and the vectors in all.
struct ReadStatus {
    std::uint64_t done = 0;
    std::uint64_t total = 0;
    std::uint64_t rows = 0;
};
// Called now and then while a file is read, from one thread, and once at the end.
using ReadProgress = std::function<void(const ReadStatus&)>;

struct ReadOptions {
    std::string dataset = "train";  // HDF5 dataset path inside the file
    std::string format = "";         // a format by name (npy) that overrides the path's extension
    ReadProgress progress = nullptr;  // none by default
    // The most host memory the points may take (--memory); 0: no bound. An array file of float32,
    // float16, uint8 or int8 rows (.npy, .fbin, .u8bin, .i8bin) whose rows take more stays in its
    // file, read in place through a mapping with this many bytes of it resident (PointSet::mapped).
    // Any other input that takes more (TEXMEX and HDF5 files by their size) is refused when
    // `memory_given`, and else read whole as without a bound.
    std::uint64_t memory = 0;
    bool memory_given = false;
};

// Reads the whole file as float32 rows (narrower element types are widened).
Matrix read_vectors(const std::string& path, const ReadOptions& options = {});

// The whole file with its values in their own type where a PointSet holds it: float16, uint8 and
// int8 in .npy, big-ann (.u8bin .i8bin) and TEXMEX (.bvecs) files, a quarter of float32's bytes for
// 8-bit data. float32 as it is; float64, int32 and HDF5 read as read_vectors reads them.
// Under ReadOptions::memory, an array too large for it stays in its file, mapped.
PointSet read_stored_points(const std::string& path, const ReadOptions& options = {});

// A vector file read a range or a selection of its rows at a time, without reading the rest: .npy,
// the big-ann formats (.fbin .u8bin .i8bin) and TEXMEX (.fvecs .bvecs .ivecs), whose rows lie at
// fixed places. Values are widened
// to float32 as read_vectors widens them; errors name the file, the row and the column.
class VectorRows {
public:
    virtual ~VectorRows() = default;
    virtual std::size_t rows() const = 0;
    virtual std::size_t cols() const = 0;
    // Rows [first, first + count) into `into`, whose storage is reused where it is large enough.
    virtual void read_range(std::size_t first, std::size_t count, Matrix& into) const = 0;
    // The listed rows (increasing, each below rows()), in that order.
    virtual Matrix selection(const std::vector<std::uint32_t>& rows) const = 0;
};

// The file opened for reading by rows, its header and sizes checked as read_vectors checks them: an
// array format, or an HDF5 dataset stored contiguously (libhdf5 says where its values lie, and they
// are read from there); no reader (nullptr) for a chunked or compressed HDF5 dataset, or a type
// libhdf5 alone converts, which are read whole.
std::unique_ptr<VectorRows> open_vector_rows(const std::string& path, const ReadOptions& options = {});

// Throws Error naming `path` unless it is a regular, non-empty file: the check every reader makes
// before it opens one (a named pipe would block the open), for a command to make before any work.
void check_input_file(const std::string& path);

// Vector ids, one row per query: a ground truth's true neighbours. Integers are read exactly (.ivecs;
// .npy int32, int64, uint32, uint64; an HDF5 integer dataset, `neighbors` in the ann-benchmarks
// layout); any other file read_vectors reads is taken when every value is a whole number >= 0.
// Throws Error naming the file and, for a value that is no id, its row and column.
IdMatrix read_ids(const std::string& path, const ReadOptions& options = {});

// Throws Error naming `name`, the row and the column of the first id outside [0, n).
void check_vector_ids(const IdMatrix& ids, std::uint64_t n, const std::string& name);

// Whether the HDF5 file at `path` has a dataset (or any object) at `dataset`; throws Error when the
// file cannot be opened as HDF5.
bool has_hdf5_dataset(const std::string& path, const std::string& dataset);

// Throws Error unless `format` names a format read_vectors reads (fvecs bvecs ivecs fbin u8bin npy
// h5 hdf5), so that a command can refuse it before it reads anything.
void check_input_format(const std::string& format);

// The path to read standard input in `format` by, as a regular file of known size that every reader
// takes: /dev/stdin, once standard input, where it is a pipe, was read to its end into an anonymous
// file in memory that then stands in its place (a regular file is read where it is). Throws Error
// when standard input is a terminal or cannot be read, when memory runs out, and for HDF5 from a
// pipe (the HDF5 library opens files by a name that leads to them, which a file in memory lacks).
std::string standard_input_file(const std::string& format);

// The metric an input names itself: an HDF5 file's `distance` attribute (the ann-benchmarks layout:
// euclidean or angular; ip or dot for the inner product). Other inputs, and HDF5 files without it,
// name none (nullopt). Throws Error naming the file and the attribute when it holds a distance
// vlattice does not handle. `format`, when given, says the file is HDF5 instead of its extension.
std::optional<Metric> input_metric(const std::string& path, const std::string& format = {});

// Throws Error naming the file, the row (counted from `first_row`, for a part of a file) and the
// column of the first NaN or Inf.
void check_finite(const PointView& points, const std::string& path, std::size_t first_row = 0);

// Whether the path names an HDF5 file (.h5 or .hdf5, any case).
bool is_hdf5_path(const std::string& path);

// The dataset write_vectors puts an HDF5 file's vectors in: the name compress reads by default.
inline constexpr const char* kWrittenHdf5Dataset = "train";

// Writes .fvecs, .fbin, .npy or .h5/.hdf5 (float32, dataset kWrittenHdf5Dataset), chosen by
// `format` or else by the path's extension, under a temporary name that is renamed into place.
void write_vectors(const std::string& path, const Matrix& points, const std::string& format = {});

// Writes fvecs, fbin or npy to a stream such as standard output (HDF5 needs a file to seek in: an
// Error), flushes it and throws Error, naming the stream by `name`, when a write failed; what was
// written before the failure stays written.
void write_vectors(std::ostream& out, const std::string& name, const Matrix& points, const std::string& format);

// Throws the Error write_vectors would for the format or the path's extension (for a `stream`, the
// stream's name), so that a command can refuse it before its work.
void check_vectors_output(const std::string& path, const std::string& format = {}, bool stream = false);

}  // namespace vlattice
