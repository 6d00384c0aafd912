// Product-coded files for the search tests, CPU and GPU, built in memory without training: either
// centroids taken from the rotated residuals of random vectors, each vector coded by the nearest
// centroid of every sub-space (with S > 1 stages: the later stages' centroids drawn smaller and
// each vector coded by encode_product_on_cpu), or (quicker, for large files) product_sample.hpp's
// random centroids and codes.
#pragma once

#include "product_sample.hpp"

#include "vlattice/format.hpp"
#include "vlattice/product_codes.hpp"
#include "vlattice/types.hpp"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace vlattice::test {

struct ProductShape {
    std::size_t p;          // coded dimensions, <= d
    std::size_t subspaces;  // M, <= p
    unsigned bits;          // 4, 8 or 12
    std::size_t stages = 1;  // S
};

enum class CodeChoice { nearest, random };

// The file of `points` under `anchors` and `assignments`, coded with a codebook of shape s.
inline VlatFile product_coded(const Matrix& points, const Matrix& anchors,
                              const std::vector<std::uint32_t>& assignments, const ProductShape& s, Metric metric,
                              std::mt19937_64& rng, CodeChoice codes = CodeChoice::nearest) {
    const std::size_t d = points.cols;
    VlatFile file;
    file.n = points.rows;
    file.d = static_cast<std::uint32_t>(d);
    file.metric = metric;
    file.anchors = anchors;
    file.assignments = assignments;
    file.codec = ResidualCodec::product;
    if (codes == CodeChoice::random) {
        file.product = random_product_codes(rng, points.rows, d, s.p, s.bits, s.subspaces, s.stages);
        return file;
    }
    if (s.stages > 1) {
        file.product.book = random_product_codes(rng, 0, d, s.p, s.bits, s.subspaces, s.stages).book;
        const std::size_t first_stage = std::size_t{1} << s.bits;
        for (std::size_t e = first_stage * s.p; e < file.product.book.centroids.data.size(); ++e) {
            file.product.book.centroids.data[e] *= 0.25f;
        }
        file.product.codes = encode_product_on_cpu(file.product.book, points, anchors, assignments);
        return file;
    }
    ProductCodebook& book = file.product.book;
    book.bits = s.bits;
    book.rotation = orthonormal_rows(s.p, d, rng);
    book.bounds = even_bounds(s.p, s.subspaces);
    // Rotated residuals in double.
    std::vector<std::vector<double>> z(points.rows, std::vector<double>(s.p));
    for (std::size_t i = 0; i < points.rows; ++i) {
        for (std::size_t t = 0; t < s.p; ++t) {
            double sum = 0.0;
            for (std::size_t k = 0; k < d; ++k) {
                const double r = static_cast<double>(points.row(i)[k]) - anchors.row(assignments[i])[k];
                sum += static_cast<double>(book.rotation.row(t)[k]) * r;
            }
            z[i][t] = sum;
        }
    }
    const std::size_t count = std::size_t{1} << s.bits;
    const std::size_t cb = book.code_bytes();
    book.centroids = Matrix(count, s.p);
    file.product.codes.assign(points.rows * cb, 0);
    std::normal_distribution<double> noise(0.0, 0.1);
    std::uniform_int_distribution<std::size_t> pick(0, points.rows == 0 ? 0 : points.rows - 1);
    for (std::size_t c = 0; c < count; ++c) {
        const std::size_t i = pick(rng);
        for (std::size_t t = 0; t < s.p; ++t) {
            book.centroids.row(c)[t] = static_cast<float>((points.rows == 0 ? 0.0 : z[i][t]) + noise(rng));
        }
    }
    for (std::size_t i = 0; i < points.rows; ++i) {
        for (std::size_t j = 0; j < s.subspaces; ++j) {
            double best = std::numeric_limits<double>::infinity();
            unsigned best_c = 0;
            for (unsigned c = 0; c < count; ++c) {
                double sum = 0.0;
                for (std::size_t t = book.bounds[j]; t < book.bounds[j + 1]; ++t) {
                    const double diff = z[i][t] - book.centroids.row(c)[t];
                    sum += diff * diff;
                }
                if (sum < best) {
                    best = sum;
                    best_c = c;
                }
            }
            put_code(file.product.codes.data() + i * cb, s.bits, j, best_c);
        }
    }
    return file;
}

}  // namespace vlattice::test
