// Product-coded files built in memory, without training: a random rotation with orthonormal rows
// (Gram-Schmidt in double), and either centroids taken from the rotated residuals of random vectors
// with each vector coded by the nearest centroid of every sub-space, or (quicker, for large files)
// random centroids and random codes. For the search tests, CPU and GPU.
#pragma once

#include "vlattice/format.hpp"
#include "vlattice/product_codes.hpp"
#include "vlattice/types.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace vlattice::test {

struct ProductShape {
    std::size_t p;          // coded dimensions, <= d
    std::size_t subspaces;  // M, <= p
    unsigned bits;          // 4 or 8
};

// p x d, orthonormal rows.
inline Matrix random_rotation(std::size_t p, std::size_t d, std::mt19937_64& rng) {
    std::normal_distribution<double> normal;
    std::vector<std::vector<double>> rows;
    while (rows.size() < p) {
        std::vector<double> v(d);
        for (double& x : v) {
            x = normal(rng);
        }
        // Twice, so that the rounding of the first pass is taken out too.
        for (int pass = 0; pass < 2; ++pass) {
            for (const auto& r : rows) {
                double dot = 0.0;
                for (std::size_t k = 0; k < d; ++k) {
                    dot += v[k] * r[k];
                }
                for (std::size_t k = 0; k < d; ++k) {
                    v[k] -= dot * r[k];
                }
            }
        }
        double norm = 0.0;
        for (const double x : v) {
            norm += x * x;
        }
        norm = std::sqrt(norm);
        for (double& x : v) {
            x /= norm;
        }
        rows.push_back(v);
    }
    Matrix r(p, d);
    for (std::size_t t = 0; t < p; ++t) {
        for (std::size_t k = 0; k < d; ++k) {
            r.row(t)[k] = static_cast<float>(rows[t][k]);
        }
    }
    return r;
}

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
    ProductCodebook& book = file.product.book;
    book.bits = s.bits;
    book.rotation = random_rotation(s.p, d, rng);
    for (std::size_t j = 0; j <= s.subspaces; ++j) {
        book.bounds.push_back(static_cast<std::uint32_t>(j * s.p / s.subspaces));
    }
    const std::size_t count = std::size_t{1} << s.bits;
    const std::size_t cb = book.code_bytes();
    book.centroids = Matrix(count, s.p);
    file.product.codes.assign(points.rows * cb, 0);
    if (codes == CodeChoice::random) {
        std::normal_distribution<float> normal;
        for (float& v : book.centroids.data) {
            v = normal(rng);
        }
        std::uniform_int_distribution<unsigned> code(0, static_cast<unsigned>(count - 1));
        for (std::size_t i = 0; i < points.rows; ++i) {
            for (std::size_t j = 0; j < s.subspaces; ++j) {
                std::uint8_t& byte = file.product.codes[i * cb + (s.bits == 8 ? j : j / 2)];
                byte = static_cast<std::uint8_t>(byte | code(rng) << (s.bits == 8 ? 0 : 4 * (j % 2)));
            }
        }
        return file;
    }
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
            std::uint8_t* code = file.product.codes.data() + i * cb;
            if (s.bits == 8) {
                code[j] = static_cast<std::uint8_t>(best_c);
            } else {
                code[j / 2] = static_cast<std::uint8_t>(code[j / 2] | best_c << (4 * (j % 2)));
            }
        }
    }
    return file;
}

// Every vector's reconstruction (decode_product_row).
inline Matrix product_reconstruction(const VlatFile& file) {
    Matrix y(file.n, file.d);
    for (std::size_t i = 0; i < file.n; ++i) {
        decode_product_row(file.anchors, file.product, file.assignments[i], i, y.row(i));
    }
    return y;
}

}  // namespace vlattice::test
