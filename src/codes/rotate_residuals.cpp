// Rotating residuals, z = R (x - c(a)) (include/vlattice/product_codes.hpp): the arithmetic the GPU
// repeats, so every sum is written out in its order.
#include "vlattice/product_codes.hpp"

#include "codes/residuals.hpp"
#include "codes/rotation.hpp"
#include "numeric.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace vlattice {

namespace {

// A block of rows times a tile of rotated coordinates is summed in local accumulators over every k
// in turn, so each z[t] still adds its d products in k order from +0 while the t loop vectorises
// and the tile of R^T (d x kTile) is read once per block of rows instead of once per row.
constexpr std::size_t kBlockRows = 8;
constexpr std::size_t kTile = 32;

// The rotation transposed (d x padded p), its columns padded with zeros to a multiple of kTile so
// that every tile has the same shape; padded coordinates are computed and dropped.
struct Transposed {
    std::size_t p = 0, d = 0, padded = 0;
    std::vector<float> values;
};

Transposed transpose(const Matrix& rotation) {
    Transposed t;
    t.p = rotation.rows;
    t.d = rotation.cols;
    t.padded = (t.p + kTile - 1) / kTile * kTile;
    t.values.assign(t.d * t.padded, 0.0f);
    for (std::size_t row = 0; row < t.p; ++row) {
        for (std::size_t k = 0; k < t.d; ++k) {
            t.values[k * t.padded + row] = rotation.row(row)[k];
        }
    }
    return t;
}

// kBlockRows residuals (rows past `count` are zeros) into out[0..count) x p.
VLATTICE_ALSO_FOR_X86_64_V3_V4
void rotate_block(const Transposed& rt, const float* residual, std::size_t count, float* out) {
    const std::size_t d = rt.d;
    for (std::size_t t0 = 0; t0 < rt.padded; t0 += kTile) {
        float sum[kBlockRows][kTile] = {};
        for (std::size_t k = 0; k < d; ++k) {
            const float* column = rt.values.data() + k * rt.padded + t0;
            for (std::size_t b = 0; b < kBlockRows; ++b) {
                const float r = residual[b * d + k];
                for (std::size_t t = 0; t < kTile; ++t) {
                    sum[b][t] += column[t] * r;
                }
            }
        }
        const std::size_t width = std::min(kTile, rt.p - t0);
        for (std::size_t b = 0; b < count; ++b) {
            std::copy(sum[b], sum[b] + width, out + b * rt.p + t0);
        }
    }
}

// Rotates the n rows that fill(i, r) writes, block by block.
template <class Fill>
Matrix rotate(const Matrix& rotation, std::size_t n, Fill fill) {
    const Transposed rt = transpose(rotation);
    Matrix z(n, rt.p);
    const std::size_t blocks = (n + kBlockRows - 1) / kBlockRows;
#pragma omp parallel if (n * rt.d * rt.p >= kParallelValues)
    {
        std::vector<float> block(kBlockRows * rt.d, 0.0f);
#pragma omp for schedule(static)
        for (std::size_t b = 0; b < blocks; ++b) {
            const std::size_t first = b * kBlockRows;
            const std::size_t count = std::min(kBlockRows, n - first);
            for (std::size_t r = 0; r < count; ++r) {
                fill(first + r, block.data() + r * rt.d);
            }
            std::fill(block.begin() + count * rt.d, block.end(), 0.0f);
            rotate_block(rt, block.data(), count, z.row(first));
        }
    }
    return z;
}

void require_columns(const Matrix& rotation, std::size_t d, const char* caller) {
    if (rotation.cols != d) {
        throw Error(std::string(caller) + ": the rotation has " + std::to_string(rotation.cols) +
                    " columns for residuals of " + std::to_string(d) + " dimensions");
    }
}

}  // namespace

Matrix rotate_rows(const Matrix& rotation, const Matrix& residuals) {
    const std::size_t d = residuals.cols;
    require_columns(rotation, d, "rotate_rows");
    return rotate(rotation, residuals.rows,
                  [&](std::size_t i, float* r) { std::copy(residuals.row(i), residuals.row(i) + d, r); });
}

Matrix rotate_residuals(const ProductCodebook& book, const Matrix& points, const Matrix& anchors,
                        const std::vector<std::uint32_t>& assignments) {
    check_residual_inputs(points, anchors, assignments, "rotate_residuals");
    require_columns(book.rotation, points.cols, "rotate_residuals");
    return rotate(book.rotation, points.rows,
                  [&](std::size_t i, float* r) { residual_of(points, anchors, assignments, i, r); });
}

}  // namespace vlattice
