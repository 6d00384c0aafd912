// The header of a .npy file: a Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (1000, 128), }
// Only the literal forms numpy writes are understood (strings, True/False, tuples of integers).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vlattice::io {

struct NpyHeader {
    std::string descr;
    bool fortran_order = false;
    std::vector<std::uint64_t> shape;
};

// Errors name the file and the field that is missing or malformed.
NpyHeader parse_npy_header(const std::string& path, const std::string& text);

// The dict for a C-order float32 (rows, cols) array, padded with spaces and ended with '\n' so that
// the data starts on a 64-byte boundary after a version 1.0 preamble, as numpy itself writes it.
std::string format_npy_header(std::uint64_t rows, std::uint64_t cols);

}  // namespace vlattice::io
