#include "io/hdf5.hpp"

#include "io/binary_file.hpp"
#include "io/elements.hpp"
#include "io/hdf5_handle.hpp"
#include "io/hdf5_links.hpp"
#include "io/ids.hpp"

#include <hdf5.h>

#include <functional>
#include <optional>

namespace vlattice::io {

namespace {

// The innermost entry of HDF5's error stack is the most specific reason a call failed; it goes
// into our message in place of the library's own multi-line dump.
std::string hdf5_reason() {
    std::string reason;
    const auto innermost = [](unsigned n, const H5E_error2_t* entry, void* out) -> herr_t {
        if (n == 0 && entry->desc != nullptr) {
            *static_cast<std::string*>(out) = entry->desc;
        }
        return 0;
    };
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, innermost, &reason);
    return reason.empty() ? std::string() : " (" + reason + ")";
}

std::string top_level_names(hid_t file) {
    std::string names;
    const auto collect = [](hid_t, const char* name, const H5L_info_t*, void* out) -> herr_t {
        auto& list = *static_cast<std::string*>(out);
        list += (list.empty() ? "" : ", ") + std::string(name);
        return 0;
    };
    H5Literate(file, H5_INDEX_NAME, H5_ITER_INC, nullptr, collect, &names);
    return names.empty() ? "the file has no top-level names" : "top-level names: " + names;
}

std::string shape_text(const hsize_t* dims, int rank) {
    return io::shape_text(std::vector<std::uint64_t>(dims, dims + rank));
}

// A dataset's extent is only a promise: its data may never have been written (reads would return
// fill values) or may lie past the end of a truncated file. Checked before the matrix is allocated.
void check_storage(const std::string& where, std::uint64_t file_size, hid_t dataset, hid_t space,
                   const hsize_t* dims, std::uint64_t promised_bytes) {
    const Hdf5Handle plist(H5Dget_create_plist(dataset), H5Pclose);
    switch (H5Pget_layout(plist.get())) {
    case H5D_COMPACT:
        return;
    case H5D_CONTIGUOUS: {
        // libhdf5 would open those files by itself, unchecked.
        if (H5Pget_external_count(plist.get()) > 0) {
            throw Error(where + " keeps its data in external raw files, which vlattice does not read; store the "
                                "data in the HDF5 file itself");
        }
        const haddr_t offset = H5Dget_offset(dataset);
        if (offset == HADDR_UNDEF) {
            throw Error(where + " has no data written");
        }
        if (offset + promised_bytes > file_size) {
            throw Error(where + ": truncated: its " + std::to_string(promised_bytes) + " bytes at offset " +
                        std::to_string(offset) + " run past the end of the " + std::to_string(file_size) +
                        "-byte file");
        }
        return;
    }
    case H5D_CHUNKED: {
        hsize_t chunk[2] = {0, 0};
        hsize_t written = 0;
        if (H5Pget_chunk(plist.get(), 2, chunk) != 2 || H5Dget_num_chunks(dataset, space, &written) < 0) {
            throw Error(where + ": cannot read its chunk layout" + hdf5_reason());
        }
        const hsize_t needed = ((dims[0] + chunk[0] - 1) / chunk[0]) * ((dims[1] + chunk[1] - 1) / chunk[1]);
        if (written < needed) {
            throw Error(where + " has only " + std::to_string(written) + " of its " + std::to_string(needed) +
                        " chunks written; the file is incomplete");
        }
        return;
    }
    default:
        throw Error(where + " has a storage layout other than contiguous, chunked or compact");
    }
}

// The file a dataset's data is in: the file opened, or the one an external link led to.
std::string holding_file(const std::string& where, hid_t dataset) {
    const Hdf5Handle file(H5Iget_file_id(dataset), H5Fclose);
    const ssize_t length = file.valid() ? H5Fget_name(file.get(), nullptr, 0) : -1;
    if (length < 0) {
        throw Error(where + ": cannot tell which file holds it" + hdf5_reason());
    }
    std::string name(static_cast<std::size_t>(length) + 1, '\0');
    H5Fget_name(file.get(), name.data(), name.size());
    name.resize(static_cast<std::size_t>(length));
    return name;
}

// Rows per block of a read: a few MiB of them, but whole chunks of a chunked dataset, so that no
// chunk is decompressed twice.
hsize_t rows_per_block(hid_t dataset, const hsize_t* dims) {
    hsize_t rows = std::max<hsize_t>(1, kStagingBytes / (dims[1] * sizeof(double)));
    const Hdf5Handle plist(H5Dget_create_plist(dataset), H5Pclose);
    hsize_t chunk[2] = {0, 0};
    if (H5Pget_layout(plist.get()) == H5D_CHUNKED && H5Pget_chunk(plist.get(), 2, chunk) == 2 && chunk[0] > 0) {
        rows = (rows + chunk[0] - 1) / chunk[0] * chunk[0];
    }
    return std::min(rows, dims[0]);
}

// An open 2-D numeric dataset whose shape and storage have been checked.
struct MatrixDataset {
    hid_t data;
    hid_t space;
    const hsize_t* dims;  // rows, columns
    H5T_class_t type_class;
    std::string where;    // "FILE: dataset 'NAME'", for errors
    std::string holder;   // the file its data is in
};

std::size_t stored_size(const MatrixDataset& d) {
    const Hdf5Handle type(H5Dget_type(d.data), H5Tclose);
    return H5Tget_size(type.get());
}

// Reads the dataset a block of rows at a time as `memory_type`, into block(first, rows), and then
// calls done(first, rows), so that a long read reports its progress (the bytes as stored).
void read_blocks(const MatrixDataset& d, hid_t memory_type, const std::function<void*(hsize_t, hsize_t)>& block,
                 const std::function<void(hsize_t, hsize_t)>& done, const ReadProgress& progress) {
    const hsize_t rows = rows_per_block(d.data, d.dims);
    const std::size_t stored_bytes = stored_size(d);
    const std::uint64_t total = static_cast<std::uint64_t>(d.dims[0]) * d.dims[1] * stored_bytes;
    for (hsize_t first = 0; first < d.dims[0]; first += rows) {
        const hsize_t start[2] = {first, 0};
        const hsize_t count[2] = {std::min(rows, d.dims[0] - first), d.dims[1]};
        const Hdf5Handle memory(H5Screate_simple(2, count, nullptr), H5Sclose);
        if (H5Sselect_hyperslab(d.space, H5S_SELECT_SET, start, nullptr, count, nullptr) < 0 ||
            H5Dread(d.data, memory_type, memory.get(), d.space, H5P_DEFAULT, block(first, count[0])) < 0) {
            throw Error(d.where + ": read failed" + hdf5_reason());
        }
        done(first, count[0]);
        if (progress) {
            progress({(first + count[0]) * d.dims[1] * stored_bytes, total, d.dims[0]});
        }
    }
}

// float64 is narrowed here rather than by libhdf5, which turns a value beyond float32's range into
// Inf without saying where it was; other types libhdf5 converts.
Matrix read_floats(const MatrixDataset& d, const ReadProgress& progress) {
    Matrix points = allocate_table<Matrix>(d.where, d.dims[0], d.dims[1]);
    const std::size_t cols = d.dims[1];
    if (d.type_class != H5T_FLOAT || stored_size(d) <= sizeof(float)) {
        read_blocks(
            d, H5T_NATIVE_FLOAT, [&](hsize_t first, hsize_t) -> void* { return points.row(first); },
            [](hsize_t, hsize_t) {}, progress);
        return points;
    }
    std::vector<double> staging;
    read_blocks(
        d, H5T_NATIVE_DOUBLE,
        [&](hsize_t, hsize_t rows) -> void* {
            staging.resize(rows * cols);
            return staging.data();
        },
        [&](hsize_t first, hsize_t rows) {
            narrow(staging.data(), rows * cols, first * cols, cols, points.row(first), d.where);
        },
        progress);
    return points;
}

// The values' type where io reads it from the file's bytes (element_bytes): IEEE float16 (HDF5 has
// no predefined one; h5py writes one with IEEE's fields), float32 or float64, uint8, int8 or int32,
// every bit of the value its own.
std::optional<ElementType> element_type(hid_t type) {
    const std::size_t size = H5Tget_size(type);
    if (H5Tget_precision(type) != size * 8 || H5Tget_offset(type) != 0) {
        return std::nullopt;
    }
    if (H5Tget_class(type) == H5T_INTEGER) {
        const bool sign = H5Tget_sign(type) != H5T_SGN_NONE;
        if (size == 1) {
            return sign ? ElementType::i8 : ElementType::u8;
        }
        return size == 4 && sign ? std::optional<ElementType>(ElementType::i32) : std::nullopt;
    }
    std::size_t sign = 0;
    std::size_t exponent_at = 0;
    std::size_t exponent_bits = 0;
    std::size_t mantissa_at = 0;
    std::size_t mantissa_bits = 0;
    if (H5Tget_class(type) != H5T_FLOAT ||
        H5Tget_fields(type, &sign, &exponent_at, &exponent_bits, &mantissa_at, &mantissa_bits) < 0 ||
        H5Tget_norm(type) != H5T_NORM_IMPLIED || mantissa_at != 0 || sign != size * 8 - 1 ||
        exponent_at != mantissa_bits || exponent_bits + mantissa_bits + 1 != size * 8) {
        return std::nullopt;
    }
    const std::size_t bias = H5Tget_ebias(type);
    if (size == 2 && exponent_bits == 5 && bias == 15) {
        return ElementType::f16;
    }
    if (size == 4 && exponent_bits == 8 && bias == 127) {
        return ElementType::f32;
    }
    if (size == 8 && exponent_bits == 11 && bias == 1023) {
        return ElementType::f64;
    }
    return std::nullopt;
}

// The type a PointSet holds the values in as they are (float32, float16, uint8, int8), else nullopt.
std::optional<ElementType> held_type(hid_t type) {
    const std::optional<ElementType> element = element_type(type);
    return element && stored_type_of(*element) ? element : std::nullopt;
}

// The same type in this machine's byte order, for libhdf5 to read values into: a copy, for the
// caller to close.
hid_t native_type(ElementType type, hid_t stored) {
    switch (type) {
    case ElementType::u8:
        return H5Tcopy(H5T_NATIVE_UCHAR);
    case ElementType::i8:
        return H5Tcopy(H5T_NATIVE_SCHAR);
    case ElementType::f32:
        return H5Tcopy(H5T_NATIVE_FLOAT);
    default: {
        const hid_t half = H5Tcopy(stored);
        H5Tset_order(half, H5Tget_order(H5T_NATIVE_USHORT));
        return half;
    }
    }
}

// Opens `dataset` of `path`, checks it, and hands it to `read`: what the vector and the id readers share.
void read_matrix_dataset(const std::string& path, const std::string& dataset,
                         const std::function<void(const MatrixDataset&)>& read) {
    const std::uint64_t file_size = nonempty_file_size(path);
    // libhdf5 prints its whole error stack to stderr by default; we report errors ourselves.
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);

    const Hdf5Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
    if (!file.valid()) {
        throw Error(path + ": cannot open as HDF5" + hdf5_reason());
    }
    std::string where = path + ": dataset '" + dataset + "'";
    std::string link_refusal;
    const Hdf5Handle access = regular_link_access(link_refusal);
    if (H5Lexists(file.get(), dataset.c_str(), access.get()) <= 0) {
        throw Error(!link_refusal.empty()
                        ? link_refusal
                        : path + ": no dataset '" + dataset + "' (" + top_level_names(file.get()) + ")");
    }
    const Hdf5Handle data(H5Dopen2(file.get(), dataset.c_str(), access.get()), H5Dclose);
    if (!data.valid()) {
        throw Error(!link_refusal.empty() ? link_refusal : where + " cannot be opened as a dataset" + hdf5_reason());
    }
    // The storage is checked against the file that holds it, which is another one behind an external link.
    const std::string holder = holding_file(where, data.get());
    const std::uint64_t holder_size = holder == path ? file_size : nonempty_file_size(holder);
    if (holder != path) {
        where += " (in " + holder + ", through an external link)";
    }

    const Hdf5Handle space(H5Dget_space(data.get()), H5Sclose);
    const int rank = H5Sget_simple_extent_ndims(space.get());
    if (rank < 0) {
        throw Error(where + ": cannot read its shape" + hdf5_reason());
    }
    hsize_t dims[H5S_MAX_RANK] = {};
    H5Sget_simple_extent_dims(space.get(), dims, nullptr);
    if (rank != 2) {
        throw Error(where + " has shape " + shape_text(dims, rank) + "; expected a 2-D dataset (n, d)");
    }
    if (dims[0] == 0) {
        throw Error(where + ": no vectors (shape " + shape_text(dims, rank) + ")");
    }
    if (dims[1] == 0) {
        throw Error(where + " has shape " + shape_text(dims, rank) + "; vectors need a column");
    }

    const Hdf5Handle type(H5Dget_type(data.get()), H5Tclose);
    const H5T_class_t type_class = H5Tget_class(type.get());
    if (type_class != H5T_FLOAT && type_class != H5T_INTEGER) {
        throw Error(where + " does not hold integers or floating-point numbers");
    }
    const std::uint64_t element_bytes = H5Tget_size(type.get());
    check_storage(where, holder_size, data.get(), space.get(), dims,
                  checked_multiply(path, checked_multiply(path, dims[0], dims[1]), element_bytes));
    read({data.get(), space.get(), dims, type_class, where, holder});
}

}  // namespace

Matrix read_hdf5(const std::string& path, const std::string& dataset, const ReadProgress& progress) {
    Matrix points;
    read_matrix_dataset(path, dataset, [&](const MatrixDataset& d) { points = read_floats(d, progress); });
    return points;
}

PointSet read_hdf5_points(const std::string& path, const std::string& dataset, const ReadProgress& progress) {
    PointSet points;
    read_matrix_dataset(path, dataset, [&](const MatrixDataset& d) {
        const Hdf5Handle stored(H5Dget_type(d.data), H5Tclose);
        const std::optional<ElementType> held = held_type(stored.get());
        if (!held || *held == ElementType::f32) {
            points = PointSet(read_floats(d, progress));
            return;
        }
        const StoredType type = *stored_type_of(*held);
        const std::size_t row_bytes = d.dims[1] * stored_type_bytes(type);
        check_memory(d.where + ": " + count_text(d.dims[0]) + " x " + count_text(d.dims[1]) + " " +
                         stored_type_name(type),
                     table_bytes(d.dims[0], d.dims[1], stored_type_bytes(type)));
        points = PointSet::unset(type, d.dims[0], d.dims[1]);
        auto* out = static_cast<char*>(points.values());
        const Hdf5Handle memory(native_type(*held, stored.get()), H5Tclose);
        read_blocks(
            d, memory.get(), [&](hsize_t first, hsize_t) -> void* { return out + first * row_bytes; },
            [](hsize_t, hsize_t) {}, progress);
    });
    return points;
}

Hdf5Placement hdf5_placement(const std::string& path, const std::string& dataset) {
    Hdf5Placement place;
    read_matrix_dataset(path, dataset, [&](const MatrixDataset& d) {
        const Hdf5Handle stored(H5Dget_type(d.data), H5Tclose);
        const std::optional<ElementType> element = element_type(stored.get());
        const bool held = element && stored_type_of(*element);
        place.file = d.holder;
        place.bytes = table_bytes(d.dims[0], d.dims[1], held ? element_bytes(*element) : sizeof(float));
        const Hdf5Handle plist(H5Dget_create_plist(d.data), H5Pclose);
        if (!element) {
            place.reason = "its values are of a type that libhdf5 converts to float32 as they are read";
        } else if (H5Pget_layout(plist.get()) != H5D_CONTIGUOUS) {
            place.reason = "it is not stored contiguously (a chunked or compressed dataset is read only through "
                           "libhdf5; one that h5py's create_dataset writes with neither chunks nor compression can be "
                           "read in place)";
        } else if (H5Tget_size(stored.get()) > 1 && H5Tget_order(stored.get()) != H5T_ORDER_LE) {
            place.reason = "its values are big-endian";
        } else {
            place.layout = ArrayLayout{H5Dget_offset(d.data), d.dims[0], d.dims[1], *element, false};
            if (!held) {
                place.reason = "its values are converted to float32 as they are read (float32, float16, uint8 or "
                               "int8 values can be read in place)";
            } else if (place.layout->offset % element_bytes(*element) != 0) {
                // libhdf5 places raw data at any byte; reads at an offset copy it out, a mapping could not.
                place.reason = "its values start at byte " + std::to_string(place.layout->offset) +
                               ", not at a multiple of their size";
            }
        }
    });
    return place;
}

IdMatrix read_hdf5_ids(const std::string& path, const std::string& dataset) {
    IdMatrix ids;
    read_matrix_dataset(path, dataset, [&](const MatrixDataset& d) {
        if (d.type_class != H5T_INTEGER) {
            ids = whole_ids(read_floats(d, {}), d.where);
            return;
        }
        ids = allocate_table<IdMatrix>(d.where, d.dims[0], d.dims[1]);
        if (H5Dread(d.data, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, ids.data.data()) < 0) {
            throw Error(d.where + ": read failed" + hdf5_reason());
        }
    });
    return ids;
}

std::string read_hdf5_text_attribute(const std::string& path, const std::string& name) {
    nonempty_file_size(path);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    const Hdf5Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
    if (!file.valid()) {
        throw Error(path + ": cannot open as HDF5" + hdf5_reason());
    }
    if (H5Aexists(file.get(), name.c_str()) <= 0) {
        return "";
    }
    const std::string where = path + ": attribute '" + name + "'";
    const Hdf5Handle attribute(H5Aopen(file.get(), name.c_str(), H5P_DEFAULT), H5Aclose);
    const Hdf5Handle type(H5Aget_type(attribute.get()), H5Tclose);
    if (!attribute.valid() || !type.valid() || H5Tget_class(type.get()) != H5T_STRING) {
        throw Error(where + " is not text" + hdf5_reason());
    }
    // h5py writes variable-length strings; other writers, fixed-length ones.
    if (H5Tis_variable_str(type.get()) > 0) {
        const Hdf5Handle memory(H5Tcopy(H5T_C_S1), H5Tclose);
        H5Tset_size(memory.get(), H5T_VARIABLE);
        H5Tset_cset(memory.get(), H5Tget_cset(type.get()));
        char* text = nullptr;
        if (H5Aread(attribute.get(), memory.get(), &text) < 0 || text == nullptr) {
            throw Error(where + ": read failed" + hdf5_reason());
        }
        std::string value(text);
        H5free_memory(text);
        return value;
    }
    const std::size_t size = H5Tget_size(type.get());
    std::string value(size, '\0');
    if (H5Aread(attribute.get(), type.get(), value.data()) < 0) {
        throw Error(where + ": read failed" + hdf5_reason());
    }
    value.resize(value.find('\0') == std::string::npos ? size : value.find('\0'));
    return value;
}

bool has_hdf5_dataset(const std::string& path, const std::string& dataset) {
    nonempty_file_size(path);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    const Hdf5Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
    if (!file.valid()) {
        throw Error(path + ": cannot open as HDF5" + hdf5_reason());
    }
    std::string link_refusal;
    const Hdf5Handle access = regular_link_access(link_refusal);
    const bool exists = H5Lexists(file.get(), dataset.c_str(), access.get()) > 0;
    if (!link_refusal.empty()) {
        throw Error(link_refusal);
    }
    return exists;
}

}  // namespace vlattice::io
