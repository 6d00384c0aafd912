// The mean squared error of a product code (codes/product_error.hpp).
#include "codes/product_error.hpp"

#include "codes/residuals.hpp"
#include "numeric.hpp"

#include <algorithm>

namespace vlattice {

double product_mse(const ProductCodebook& book, const Matrix& points, const Matrix& anchors,
                   const std::vector<std::uint32_t>& assignments, Backend& backend) {
    const std::vector<std::uint8_t> codes = encode_product(book, points, anchors, assignments, backend);
    Matrix residuals(points.rows, points.cols);
#pragma omp parallel for schedule(static) if (residuals.data.size() >= kParallelValues)
    for (std::size_t i = 0; i < points.rows; ++i) {
        residual_of(points, anchors, assignments, i, residuals.row(i));
    }
    const Matrix rotated = backend.rotate_rows(book.rotation, residuals);
    const std::size_t p = rotated.cols;
    const std::size_t bytes = book.code_bytes();
    const double total = deterministic_sum(
        points.rows,
        [&](std::size_t i) {
            thread_local std::vector<float> decoded;
            decoded.resize(p);
            code_values(book, codes.data() + i * bytes, decoded.data());
            const float* z = rotated.row(i);
            double miss = 0.0, coded = 0.0, residual = 0.0;
            for (std::size_t t = 0; t < p; ++t) {
                const double e = static_cast<double>(z[t]) - decoded[t];
                miss += e * e;
                coded += static_cast<double>(z[t]) * z[t];
            }
            for (std::size_t k = 0; k < residuals.cols; ++k) {
                residual += static_cast<double>(residuals.row(i)[k]) * residuals.row(i)[k];
            }
            return miss + std::max(0.0, residual - coded);
        },
        p);
    return total / static_cast<double>(points.rows);
}

}  // namespace vlattice
