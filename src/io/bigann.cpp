#include "io/bigann.hpp"

#include "io/binary_file.hpp"
#include "io/elements.hpp"

namespace vlattice::io {

namespace {

template <typename T>
Matrix read_bigann(const std::string& path, const char* type_name) {
    BinaryFile file(path);
    std::uint32_t header[2] = {0, 0};
    file.read(header, sizeof header, "the header (uint32 n, uint32 d)");
    const std::uint64_t rows = header[0];
    const std::uint64_t cols = header[1];
    if (rows == 0) {
        throw Error(path + ": no vectors (the header says n = 0)");
    }
    if (cols == 0) {
        throw Error(path + ": the header says dimension d = 0");
    }
    const std::uint64_t expected = sizeof header + checked_multiply(path, rows * cols, sizeof(T));
    const std::string promise = std::to_string(rows) + " x " + std::to_string(cols) + " " + type_name + " (" +
                                std::to_string(expected) + " bytes with the header)";
    if (file.size() < expected) {
        throw Error(path + ": truncated: the header promises " + promise + " but the file has only " +
                    std::to_string(file.size()) + " bytes");
    }
    if (file.size() > expected) {
        throw Error(path + ": " + std::to_string(file.size() - expected) + " bytes after the " + promise +
                    " the header promises; is the extension right?");
    }
    Matrix points = allocate_table<Matrix>(path, rows, cols);
    read_as<T>(file, points.data.size(), points.data.data(), "the vectors");
    return points;
}

}  // namespace

Matrix read_fbin(const std::string& path) {
    return read_bigann<float>(path, "float32");
}

Matrix read_u8bin(const std::string& path) {
    return read_bigann<std::uint8_t>(path, "uint8");
}

Matrix read_i8bin(const std::string& path) {
    return read_bigann<std::int8_t>(path, "int8");
}

}  // namespace vlattice::io
