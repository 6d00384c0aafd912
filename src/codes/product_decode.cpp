// Decoding a product code back to a vector (include/vlattice/product_codes.hpp).
#include "vlattice/product_codes.hpp"

#include <algorithm>
#include <vector>

namespace vlattice {

bool is_product_code_bits(unsigned bits) {
    return std::find(kProductCodeBits.begin(), kProductCodeBits.end(), bits) != kProductCodeBits.end();
}

void decode_product_row(const Matrix& anchors, const ProductCodes& codes, std::uint32_t anchor, std::size_t i,
                        float* out) {
    const ProductCodebook& book = codes.book;
    const std::size_t d = anchors.cols;
    const std::uint8_t* code = codes.codes.data() + i * book.code_bytes();
    std::fill(out, out + d, 0.0f);
    // Rotated coordinate by coordinate, so that each s[k] is summed in t order while the inner loop
    // runs over k and vectorises.
    for (std::size_t j = 0; j < book.subspaces(); ++j) {
        const float* centroid = book.centroids.row(product_code(code, book.bits, j));
        for (std::size_t t = book.bounds[j]; t < book.bounds[j + 1]; ++t) {
            const float z = centroid[t];
            const float* r = book.rotation.row(t);
            for (std::size_t k = 0; k < d; ++k) {
                out[k] += r[k] * z;
            }
        }
    }
    const float* c = anchors.row(anchor);
    for (std::size_t k = 0; k < d; ++k) {
        out[k] = c[k] + out[k];
    }
}

}  // namespace vlattice
