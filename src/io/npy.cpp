#include "io/npy.hpp"

#include "io/binary_file.hpp"
#include "io/elements.hpp"
#include "io/ids.hpp"
#include "io/npy_header.hpp"

#include <cstring>

namespace vlattice::io {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicBytes = sizeof kMagic - 1;
constexpr const char* kSupportedDescr =
    "'<f4' (float32), '<f8' (float64), '<f2' (float16), '|u1' (uint8) or '|i1' (int8)";

// Reads the preamble and returns the header text; the file is left at the first data byte.
std::string read_header_text(BinaryFile& file) {
    char preamble[kMagicBytes + 2];
    file.read(preamble, sizeof preamble, "the .npy magic and version");
    if (std::memcmp(preamble, kMagic, kMagicBytes) != 0) {
        throw Error(file.path() + ": not a .npy file (it does not start with \\x93NUMPY)");
    }
    const int major = static_cast<unsigned char>(preamble[kMagicBytes]);
    const int minor = static_cast<unsigned char>(preamble[kMagicBytes + 1]);
    std::uint64_t header_bytes = 0;
    if (major == 1 && minor == 0) {
        std::uint16_t length = 0;
        file.read(&length, sizeof length, "the header length");
        header_bytes = length;
    } else if ((major == 2 || major == 3) && minor == 0) {
        std::uint32_t length = 0;
        file.read(&length, sizeof length, "the header length");
        header_bytes = length;
    } else {
        throw Error(file.path() + ": .npy format version " + std::to_string(major) + "." + std::to_string(minor) +
                    " is not supported (1.0, 2.0 and 3.0 are)");
    }
    if (header_bytes > file.size() - file.position()) {
        throw Error(file.path() + ": truncated: the .npy header is " + std::to_string(header_bytes) +
                    " bytes long but the file has only " + std::to_string(file.size()) + " bytes");
    }
    std::string text(header_bytes, '\0');
    file.read(text.data(), text.size(), "the .npy header");
    return text;
}

// Throws Error unless the data after the header is exactly `data_bytes`, the header's shape of `type_name`.
void check_data_size(const BinaryFile& file, const NpyHeader& header, const char* type_name, std::uint64_t data_bytes) {
    const std::uint64_t available = file.size() - file.position();
    const std::string promise = "shape " + shape_text(header.shape) + " of " + type_name + " needs " +
                                std::to_string(data_bytes) + " data bytes";
    if (available < data_bytes) {
        throw Error(file.path() + ": truncated: " + promise + " but the file has " + std::to_string(available));
    }
    if (available > data_bytes) {
        throw Error(file.path() + ": " + std::to_string(available - data_bytes) + " bytes after the data (" + promise +
                    "); the file is corrupt");
    }
}

// Checks the data's size, then allocates the table (Matrix for vectors, IdMatrix for ids).
template <typename T, typename Table>
Table sized_table(BinaryFile& file, const NpyHeader& header, const char* type_name) {
    const std::uint64_t rows = header.shape[0];
    const std::uint64_t cols = header.shape[1];
    check_data_size(file, header, type_name,
                    checked_multiply(file.path(), checked_multiply(file.path(), rows, cols), sizeof(T)));
    return allocate_table<Table>(file.path(), rows, cols);
}

template <typename T>
IdMatrix read_ids_data(BinaryFile& file, const NpyHeader& header, const char* type_name) {
    IdMatrix table = sized_table<T, IdMatrix>(file, header, type_name);
    read_as<T>(file, table.data.size(), table.data.data(), "the array data");
    return table;
}

void check_layout(const std::string& path, const NpyHeader& header) {
    if (header.fortran_order) {
        throw Error(path + ": .npy header field 'fortran_order' is True; only C-order arrays are read "
                           "(save np.ascontiguousarray(x))");
    }
    if (header.shape.size() != 2) {
        throw Error(path + ": .npy header field 'shape' is " + shape_text(header.shape) +
                    "; expected a 2-D array (n, d)");
    }
    if (header.shape[0] == 0) {
        throw Error(path + ": no vectors (.npy header field 'shape' is " + shape_text(header.shape) + ")");
    }
    if (header.shape[1] == 0) {
        throw Error(path + ": .npy header field 'shape' is " + shape_text(header.shape) + "; vectors need a column");
    }
}

// The vectors' element type and place, once the data is exactly the header's shape of it.
ArrayLayout vector_layout(BinaryFile& file, const NpyHeader& header) {
    const std::string& path = file.path();
    struct Known {
        const char* descr;
        ElementType type;
        const char* name;
    };
    for (const Known known : {Known{"<f4", ElementType::f32, "float32"}, Known{"<f8", ElementType::f64, "float64"},
                              Known{"<f2", ElementType::f16, "float16"}, Known{"|u1", ElementType::u8, "uint8"},
                              Known{"<u1", ElementType::u8, "uint8"}, Known{"|i1", ElementType::i8, "int8"},
                              Known{"<i1", ElementType::i8, "int8"}}) {
        if (header.descr == known.descr) {
            const std::uint64_t data_bytes = checked_multiply(
                path, checked_multiply(path, header.shape[0], header.shape[1]), element_bytes(known.type));
            check_data_size(file, header, known.name, data_bytes);
            return {file.position(), static_cast<std::size_t>(header.shape[0]), static_cast<std::size_t>(header.shape[1]),
                    known.type};
        }
    }
    const bool ids = header.descr == "<i4" || header.descr == "<i8" || header.descr == "<u4" || header.descr == "<u8";
    throw Error(path + ": .npy header field 'descr' is '" + header.descr + "'; supported: " + kSupportedDescr +
                (ids ? " (32- and 64-bit integers are read as neighbour ids, as query --ground-truth)" : ""));
}

}  // namespace

ArrayLayout npy_layout(BinaryFile& file) {
    const NpyHeader header = parse_npy_header(file.path(), read_header_text(file));
    check_layout(file.path(), header);
    return vector_layout(file, header);
}

Matrix read_npy(const std::string& path, const ReadProgress& progress) {
    BinaryFile file(path);
    return read_array(file, npy_layout(file), progress);
}

IdMatrix read_npy_ids(const std::string& path) {
    BinaryFile file(path);
    const NpyHeader header = parse_npy_header(path, read_header_text(file));
    check_layout(path, header);
    if (header.descr == "<i4") {
        return read_ids_data<std::int32_t>(file, header, "int32");
    }
    if (header.descr == "<i8") {
        return read_ids_data<std::int64_t>(file, header, "int64");
    }
    if (header.descr == "<u4") {
        return read_ids_data<std::uint32_t>(file, header, "uint32");
    }
    if (header.descr == "<u8") {
        return read_ids_data<std::uint64_t>(file, header, "uint64");
    }
    return whole_ids(read_array(file, vector_layout(file, header), {}), path);
}

void write_npy(std::ostream& out, const Matrix& points) {
    const std::string header = format_npy_header(points.rows, points.cols);
    const auto header_bytes = static_cast<std::uint16_t>(header.size());
    out.write(kMagic, kMagicBytes);
    out.put('\x01').put('\x00');
    out.write(reinterpret_cast<const char*>(&header_bytes), sizeof header_bytes);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    out.write(reinterpret_cast<const char*>(points.data.data()),
              static_cast<std::streamsize>(points.data.size() * sizeof(float)));
}

}  // namespace vlattice::io
