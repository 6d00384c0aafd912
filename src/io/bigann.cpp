#include "io/bigann.hpp"

#include "io/binary_file.hpp"
#include "io/elements.hpp"

#include <limits>

namespace vlattice::io {

namespace {

const char* type_name(ElementType type) {
    return type == ElementType::f32 ? "float32" : type == ElementType::u8 ? "uint8" : "int8";
}

Matrix read_bigann(const std::string& path, ElementType type, const ReadProgress& progress) {
    BinaryFile file(path);
    return read_array(file, bigann_layout(file, type), progress);
}

}  // namespace

ArrayLayout bigann_layout(BinaryFile& file, ElementType type) {
    const std::string& path = file.path();
    std::uint32_t header[2] = {0, 0};
    file.read_at(0, header, sizeof header, "the header (uint32 n, uint32 d)");
    const std::uint64_t rows = header[0];
    const std::uint64_t cols = header[1];
    if (rows == 0) {
        throw Error(path + ": no vectors (the header says n = 0)");
    }
    if (cols == 0) {
        throw Error(path + ": the header says dimension d = 0");
    }
    const std::uint64_t expected = sizeof header + checked_multiply(path, rows * cols, element_bytes(type));
    const std::string promise = std::to_string(rows) + " x " + std::to_string(cols) + " " + type_name(type) + " (" +
                                std::to_string(expected) + " bytes with the header)";
    if (file.size() < expected) {
        throw Error(path + ": truncated: the header promises " + promise + " but the file has only " +
                    std::to_string(file.size()) + " bytes");
    }
    if (file.size() > expected) {
        throw Error(path + ": " + std::to_string(file.size() - expected) + " bytes after the " + promise +
                    " the header promises; is the extension right?");
    }
    return {sizeof header, static_cast<std::size_t>(rows), static_cast<std::size_t>(cols), type};
}

Matrix read_fbin(const std::string& path, const ReadProgress& progress) {
    return read_bigann(path, ElementType::f32, progress);
}

Matrix read_u8bin(const std::string& path, const ReadProgress& progress) {
    return read_bigann(path, ElementType::u8, progress);
}

void write_fbin(std::ostream& out, const std::string& name, const Matrix& points) {
    constexpr std::uint64_t kMax = std::numeric_limits<std::uint32_t>::max();
    if (points.rows > kMax || points.cols > kMax) {
        throw Error(name + ": " + std::to_string(points.rows) + " x " + std::to_string(points.cols) +
                    " vectors do not fit the .fbin header (uint32 n and d, at most " + std::to_string(kMax) + ")");
    }
    const std::uint32_t header[2] = {static_cast<std::uint32_t>(points.rows), static_cast<std::uint32_t>(points.cols)};
    out.write(reinterpret_cast<const char*>(header), sizeof header);
    out.write(reinterpret_cast<const char*>(points.data.data()),
              static_cast<std::streamsize>(points.data.size() * sizeof(float)));
}

Matrix read_i8bin(const std::string& path, const ReadProgress& progress) {
    return read_bigann(path, ElementType::i8, progress);
}

}  // namespace vlattice::io
