// Hand-made product codes for the tests of .vlat versions 3 and 4: a random rotation with orthonormal rows
// (Gram-Schmidt in double), random centroids and random codes, packed as docs/format.md says.
#pragma once

#include "support.hpp"

#include "vlattice/format.hpp"
#include "vlattice/product_codes.hpp"

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace vlattice::test {

inline Matrix orthonormal_rows(std::size_t p, std::size_t d, std::mt19937_64& rng) {
    std::normal_distribution<double> normal;
    std::vector<std::vector<double>> rows;
    while (rows.size() < p) {
        std::vector<double> v(d);
        for (double& x : v) {
            x = normal(rng);
        }
        // Twice: one pass of classical Gram-Schmidt leaves errors that grow with the row count.
        for (int pass = 0; pass < 2; ++pass) {
            for (const std::vector<double>& u : rows) {
                double dot = 0.0;
                for (std::size_t k = 0; k < d; ++k) {
                    dot += v[k] * u[k];
                }
                for (std::size_t k = 0; k < d; ++k) {
                    v[k] -= dot * u[k];
                }
            }
        }
        double norm = 0.0;
        for (const double x : v) {
            norm += x * x;
        }
        norm = std::sqrt(norm);
        if (norm < 1e-3) {
            continue;
        }
        for (double& x : v) {
            x /= norm;
        }
        rows.push_back(v);
    }
    Matrix out(p, d);
    for (std::size_t t = 0; t < p; ++t) {
        for (std::size_t k = 0; k < d; ++k) {
            out.row(t)[k] = static_cast<float>(rows[t][k]);
        }
    }
    return out;
}

// M sub-spaces of p rotated coordinates, as even as they come: bound j is floor(j p / M).
inline std::vector<std::uint32_t> even_bounds(std::size_t p, std::size_t subspaces) {
    std::vector<std::uint32_t> bounds(subspaces + 1);
    for (std::size_t j = 0; j <= subspaces; ++j) {
        bounds[j] = static_cast<std::uint32_t>(j * p / subspaces);
    }
    return bounds;
}

// Writes code j of `bits` bits into a vector's zeroed code bytes, least significant bit first, bit
// by bit (independent of pack_product_codes).
inline void put_code(std::uint8_t* code, unsigned bits, std::size_t j, unsigned value) {
    for (unsigned b = 0; b < bits; ++b) {
        const std::size_t bit = j * bits + b;
        code[bit / 8] = static_cast<std::uint8_t>(code[bit / 8] | ((value >> b) & 1u) << (bit % 8));
    }
}

// Code j of `bits` bits from a vector's code bytes, bit by bit, as put_code wrote it.
inline unsigned get_code(const std::uint8_t* code, unsigned bits, std::size_t j) {
    unsigned value = 0;
    for (unsigned b = 0; b < bits; ++b) {
        const std::size_t bit = j * bits + b;
        value |= static_cast<unsigned>((code[bit / 8] >> (bit % 8)) & 1u) << b;
    }
    return value;
}

// n random codes packed least significant bit first, unused high bits zero.
inline std::vector<std::uint8_t> random_codes(std::mt19937_64& rng, std::uint64_t n, const ProductCodebook& book) {
    std::uniform_int_distribution<unsigned> code(0, (1u << book.bits) - 1);
    std::vector<std::uint8_t> codes(n * book.code_bytes(), 0);
    for (std::uint64_t i = 0; i < n; ++i) {
        std::uint8_t* out = codes.data() + i * book.code_bytes();
        for (std::size_t j = 0; j < book.codes(); ++j) {
            put_code(out, book.bits, j, code(rng));
        }
    }
    return codes;
}

inline ProductCodes random_product_codes(std::mt19937_64& rng, std::uint64_t n, std::size_t d, std::size_t p,
                                         unsigned bits, std::size_t subspaces, std::size_t stages = 1) {
    ProductCodes out;
    out.book.bits = bits;
    out.book.stages = stages;
    out.book.rotation = orthonormal_rows(p, d, rng);
    out.book.bounds = even_bounds(p, subspaces);
    out.book.centroids = Matrix(stages << bits, p);
    std::normal_distribution<float> normal(0.0f, 2.0f);
    for (float& value : out.book.centroids.data) {
        value = normal(rng);
    }
    out.codes = random_codes(rng, n, out.book);
    return out;
}

// A version 3 file (version 4 with S > 1 stages) of n vectors (n = 0: a model) with m anchors and M
// sub-spaces over p <= d rotated coordinates.
inline VlatFile product_sample(std::mt19937_64& rng, std::uint64_t n, std::uint32_t d, std::size_t m, std::size_t p,
                               unsigned bits, std::size_t subspaces, std::size_t stages = 1) {
    VlatFile file;
    file.n = n;
    file.d = d;
    file.metric = Metric::l2;
    file.codec = ResidualCodec::product;
    file.anchors = random_points(m, d, rng);
    std::uniform_int_distribution<std::uint32_t> anchor(0, static_cast<std::uint32_t>(m - 1));
    file.assignments.resize(n);
    for (std::uint32_t& a : file.assignments) {
        a = anchor(rng);
    }
    file.product = random_product_codes(rng, n, d, p, bits, subspaces, stages);
    file.metadata_json = R"({"tool":"vlattice","codes":"product"})";
    return file;
}

}  // namespace vlattice::test
