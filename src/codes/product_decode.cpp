// Decoding a product code back to a vector (include/vlattice/product_codes.hpp).
#include "vlattice/product_codes.hpp"

#include <algorithm>
#include <vector>

namespace vlattice {

bool is_product_code_bits(unsigned bits) {
    return std::find(kProductCodeBits.begin(), kProductCodeBits.end(), bits) != kProductCodeBits.end();
}

void code_values(const ProductCodebook& book, const std::uint8_t* code, float* z) {
    const std::size_t subspaces = book.subspaces();
    for (std::size_t j = 0; j < book.codes(); ++j) {
        const float* centroid = book.centroid(j, product_code(code, book.bits, j));
        const std::size_t sub = j % subspaces;
        const bool first_stage = j < subspaces;
        for (std::size_t t = book.bounds[sub]; t < book.bounds[sub + 1]; ++t) {
            z[t] = first_stage ? centroid[t] : z[t] + centroid[t];
        }
    }
}

void decode_product_row(const Matrix& anchors, const ProductCodes& codes, std::uint32_t anchor, std::size_t i,
                        float* out) {
    const ProductCodebook& book = codes.book;
    const std::size_t d = anchors.cols;
    thread_local std::vector<float> z;
    z.resize(book.coded_dims());
    code_values(book, codes.codes.data() + i * book.code_bytes(), z.data());
    std::fill(out, out + d, 0.0f);
    // Rotated coordinate by coordinate, so that each s[k] is summed in t order while the inner loop
    // runs over k and vectorises.
    for (std::size_t t = 0; t < book.coded_dims(); ++t) {
        const float value = z[t];
        const float* r = book.rotation.row(t);
        for (std::size_t k = 0; k < d; ++k) {
            out[k] += r[k] * value;
        }
    }
    const float* c = anchors.row(anchor);
    for (std::size_t k = 0; k < d; ++k) {
        out[k] = c[k] + out[k];
    }
}

}  // namespace vlattice
