// Residual codes: each vector is stored as its anchor c plus a scalar quantisation of r = x - c, with
// a range learned per anchor and per dimension from that anchor's members.
#pragma once

#include "vlattice/types.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace vlattice {

// The widths a dimension's code may have. Width 0 stores no bits: the dimension decodes to the middle
// of its anchor's residual range.
inline constexpr std::array<unsigned, 4> kResidualWidths = {0, 2, 4, 8};
bool is_residual_width(unsigned bits);

// Where each dimension's code lies in a vector's code bytes. Dimensions are grouped by width, widest
// first (8, then 4, then 2), each group in dimension order, and values are packed least significant
// bit first; so no code straddles a byte, and each is one shift and one mask away.
struct CodeLayout {
    std::vector<std::uint8_t> bits;    // per dimension: 0, 2, 4 or 8
    std::vector<std::uint32_t> byte;   // per dimension: the byte of the vector's code that holds it
    std::vector<std::uint8_t> shift;   // per dimension: its lowest bit in that byte
    std::size_t code_bytes = 0;        // per vector: ceil(sum of bits / 8)
};

// Throws Error naming the first dimension whose width is not one of kResidualWidths.
CodeLayout code_layout(const std::vector<std::uint8_t>& bits);

// The quantiser of anchor j, dimension k, with b bits: the members' residuals span [lo, hi]; that
// range is cut into 2^b cells of width step = (hi - lo) / 2^b, and a value decodes to the centre of
// its cell, offset + step * code with offset = lo + step / 2. Width 0 decodes every member to the
// mean of their residuals, with step twice their largest distance from it. So every decoded
// residual is within step / 2 of the true one (up to float rounding): the quantiser's bound.
struct ResidualCodes {
    CodeLayout layout;
    Matrix offset;                    // m x d
    Matrix step;                      // m x d
    std::vector<std::uint8_t> codes;  // n x layout.code_bytes, vector by vector

    bool empty() const { return layout.bits.empty(); }
};

// The ranges (layout, offset, step; no codes) learned from the members of each anchor, `bits` one
// width per dimension: what a model stores to code vectors it was not trained on.
ResidualCodes learn_residual_ranges(const Matrix& points, const Matrix& anchors,
                                    const std::vector<std::uint32_t>& assignments, const std::vector<std::uint8_t>& bits);

// Sets codes.codes to the code of every row of `points` under the ranges `codes` holds; each code is
// the one whose decoded value (decode_row, exactly) is nearest the vector, clamped to the range.
void encode_with_ranges(ResidualCodes& codes, const Matrix& points, const Matrix& anchors,
                        const std::vector<std::uint32_t>& assignments);
// The same codes appended to `out` (codes.layout.code_bytes a row), codes.codes left as it is: for a
// pass that codes the rows a tile at a time.
void append_with_ranges(const ResidualCodes& codes, const Matrix& points, const Matrix& anchors,
                        const std::vector<std::uint32_t>& assignments, std::vector<std::uint8_t>& out);

// learn_residual_ranges from these points, then encode_with_ranges of the same points.
ResidualCodes encode_residuals(const Matrix& points, const Matrix& anchors, const std::vector<std::uint32_t>& assignments,
                               const std::vector<std::uint8_t>& bits);

// Vector i's reconstruction, c + (offset + step * code), evaluated in float in exactly this order
// (the GPU's decoder, cuda/search/decoded_row.cuh, repeats it), written to out[0..d). With no codes it is
// the anchor itself.
inline void decode_row(const Matrix& anchors, const ResidualCodes& codes, std::uint32_t anchor, std::size_t i, float* out) {
    const float* c = anchors.row(anchor);
    if (codes.empty()) {
        for (std::size_t k = 0; k < anchors.cols; ++k) {
            out[k] = c[k];
        }
        return;
    }
    const float* offset = codes.offset.row(anchor);
    const float* step = codes.step.row(anchor);
    const CodeLayout& layout = codes.layout;
    if (layout.code_bytes == 0) {
        for (std::size_t k = 0; k < anchors.cols; ++k) {
            out[k] = c[k] + (offset[k] + step[k] * 0.0f);
        }
        return;
    }
    // Width 0 reads byte 0 of the code with mask 0: no branch per dimension.
    const std::uint8_t* code = codes.codes.data() + i * layout.code_bytes;
    for (std::size_t k = 0; k < anchors.cols; ++k) {
        const unsigned value = (code[layout.byte[k]] >> layout.shift[k]) & ((1u << layout.bits[k]) - 1u);
        out[k] = c[k] + (offset[k] + step[k] * static_cast<float>(value));
    }
}

}  // namespace vlattice
