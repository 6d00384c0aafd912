// What a product codebook and its codes must satisfy before anything decodes them
// (include/vlattice/product_codes.hpp). The messages name the .vlat section each part is stored in
// (ROTN, CDBK, CODE: docs/format.md), since a damaged file is where a bad codebook comes from.
#include "vlattice/product_codes.hpp"

#include "codes/lapack.hpp"
#include "numeric.hpp"

#include <cblas.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <limits>

namespace vlattice {

namespace {

// R R^T may miss the identity by this much. A rotation trained in float32 misses it by about
// 1e-7 * sqrt(d); a damaged one misses it by far more.
constexpr double kOrthonormalTolerance = 1e-4;

std::string number(double value) {
    char text[32];
    std::snprintf(text, sizeof text, "%.9g", value);
    return text;
}

std::string shape(const Matrix& m) {
    return std::to_string(m.rows) + " x " + std::to_string(m.cols) + " (" + std::to_string(m.data.size()) +
           " values)";
}

void check_shapes(const ProductCodebook& book, std::size_t d) {
    if (!is_product_code_bits(book.bits)) {
        throw Error("section CDBK: codes of " + std::to_string(book.bits) + " bits (a sub-space code has 4, 8 or 12)");
    }
    const std::size_t m = book.subspaces();
    if (m == 0) {
        throw Error("section CDBK: no sub-spaces (M must be at least 1)");
    }
    if (book.bounds[0] != 0) {
        throw Error("section CDBK: sub-space bound 0 is " + std::to_string(book.bounds[0]) + " (must be 0)");
    }
    for (std::size_t j = 1; j <= m; ++j) {
        if (book.bounds[j] <= book.bounds[j - 1]) {
            throw Error("section CDBK: sub-space bound " + std::to_string(j) + " is " + std::to_string(book.bounds[j]) +
                        ", not above bound " + std::to_string(j - 1) + " (" + std::to_string(book.bounds[j - 1]) +
                        "): every sub-space holds at least one rotated coordinate");
        }
    }
    const std::size_t p = book.coded_dims();
    if (book.bounds[m] != p) {
        throw Error("section CDBK: the last sub-space bound is " + std::to_string(book.bounds[m]) +
                    ", but the rotation has p = " + std::to_string(p) + " rows");
    }
    if (p > d) {
        throw Error("section ROTN: p = " + std::to_string(p) + " rotated coordinates, more than the dimension d = " +
                    std::to_string(d));
    }
    if (book.rotation.cols != d || book.rotation.data.size() != p * d) {
        throw Error("section ROTN: the rotation is " + shape(book.rotation) + ", not p x d = " + std::to_string(p) +
                    " x " + std::to_string(d));
    }
    if (book.stages == 0) {
        throw Error("section CDBK: no stages (S must be at least 1)");
    }
    const std::size_t centroids = book.stages * book.table();
    if (book.centroids.rows != centroids || book.centroids.cols != p || book.centroids.data.size() != centroids * p) {
        throw Error("section CDBK: the centroids are " + shape(book.centroids) +
                    (book.stages > 1 ? ", not S 2^b x p = " : ", not 2^b x p = ") + std::to_string(centroids) +
                    " x " + std::to_string(p));
    }
}

void check_finite(const Matrix& values, const char* section, const char* what) {
    const auto bad = std::find_if(values.data.begin(), values.data.end(), [](float v) { return !std::isfinite(v); });
    if (bad != values.data.end()) {
        const auto i = static_cast<std::size_t>(bad - values.data.begin());
        throw Error(std::string("section ") + section + ": row " + std::to_string(i / values.cols) + ", column " +
                    std::to_string(i % values.cols) + " is " + number(*bad) + " (" + what + " must be finite)");
    }
}

// Every entry of R R^T, in double, by one BLAS product (the upper triangle; a loop of dot products
// took about as long as a whole query run's search). The first failing pair in row order is
// reported.
void check_orthonormal(const Matrix& rotation) {
    const std::size_t p = rotation.rows;
    const std::size_t d = rotation.cols;
    const std::vector<double> r(rotation.data.begin(), rotation.data.end());
    std::vector<double> gram(p * p, 0.0);
    {
        const BlasTurn turn;
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasNoTrans, static_cast<int>(p), static_cast<int>(d), 1.0, r.data(),
                    static_cast<int>(d), 0.0, gram.data(), static_cast<int>(p));
    }
    const std::string rule = " (the rotation's rows must be orthonormal: R R^T = I to " +
                             number(kOrthonormalTolerance) + ")";
    for (std::size_t t = 0; t < p; ++t) {
        for (std::size_t u = t; u < p; ++u) {
            const double value = gram[t * p + u];
            if (std::abs(value - (u == t ? 1.0 : 0.0)) <= kOrthonormalTolerance) {
                continue;
            }
            if (u == t) {
                throw Error("section ROTN: row " + std::to_string(t) + " has squared norm " + number(value) + rule);
            }
            throw Error("section ROTN: rows " + std::to_string(t) + " and " + std::to_string(u) + " have dot product " +
                        number(value) + rule);
        }
    }
}

// With orthonormal rows |R[t][k]| <= 1, so |s[k]| <= sum over t of |z[t]| <= sum over t and over the
// stages of the largest |centroid value| in column t. Half of FLT_MAX leaves room for the rows' 1e-4
// slack and the float rounding of the sums (relative (p + S) * 2^-24 at most), so every decoded value
// is finite.
void check_decode_bound(const ProductCodebook& book, double anchor_bound) {
    const Matrix& centroids = book.centroids;
    double bound = 0.0;
    for (std::size_t stage = 0; stage < book.stages; ++stage) {
        std::vector<double> largest(centroids.cols, 0.0);
        for (std::size_t c = 0; c < book.table(); ++c) {
            const float* row = centroids.row(stage * book.table() + c);
            for (std::size_t t = 0; t < centroids.cols; ++t) {
                largest[t] = std::max(largest[t], std::abs(static_cast<double>(row[t])));
            }
        }
        for (const double value : largest) {
            bound += value;
        }
    }
    const double limit = static_cast<double>(FLT_MAX) / 2.0;
    if (!(anchor_bound + bound < limit)) {
        throw Error("section CDBK: the largest anchor magnitude " + number(anchor_bound) +
                    " plus the sum over rotated coordinates of the largest centroid magnitude " + number(bound) +
                    " is not below FLT_MAX / 2 = " + number(limit) + ", so a decoded value could overflow");
    }
}

}  // namespace

void check_product_codebook(const ProductCodebook& book, std::size_t d, double anchor_bound) {
    check_shapes(book, d);
    check_finite(book.rotation, "ROTN", "the rotation");
    check_finite(book.centroids, "CDBK", "centroids");
    check_orthonormal(book.rotation);
    check_decode_bound(book, anchor_bound);
}

void check_product_code_bytes(const ProductCodes& codes, std::uint64_t n) {
    const ProductCodebook& book = codes.book;
    const std::size_t bytes = book.code_bytes();
    const std::string layout = describe_code_count(book) + " codes of " + std::to_string(book.bits) + " bits";
    if (bytes == 0 || n > std::numeric_limits<std::size_t>::max() / bytes || codes.codes.size() != n * bytes) {
        throw Error("section CODE: " + std::to_string(codes.codes.size()) + " code bytes are not n = " +
                    std::to_string(n) + " codes of " + std::to_string(bytes) + " bytes (" + layout + ")");
    }
    const unsigned used = static_cast<unsigned>((book.codes() * book.bits) % 8);
    if (used == 0) {
        return;
    }
    const unsigned unused = 0xffu & (0xffu << used);
    for (std::size_t i = 0; i < n; ++i) {
        const unsigned last = codes.codes[i * bytes + bytes - 1];
        if ((last & unused) != 0) {
            char hex[8];
            std::snprintf(hex, sizeof hex, "0x%02x", last);
            throw Error("section CODE: vector " + std::to_string(i) + " ends in byte " + hex + ", but its high " +
                        std::to_string(8 - used) + " bits hold no code (" + layout + ") and must be zero");
        }
    }
}

std::string describe_code_count(const ProductCodebook& book) {
    const std::string stages = book.stages > 1 ? "S x M = " + std::to_string(book.stages) + " x " : "M = ";
    return stages + std::to_string(book.subspaces());
}

std::string describe_product(const ProductCodebook& book) {
    const std::string stages = book.stages > 1 ? " in " + std::to_string(book.stages) + " stages" : "";
    return "M = " + std::to_string(book.subspaces()) + " x " + std::to_string(book.bits) + " bits" + stages +
           " over " + std::to_string(book.coded_dims()) + " rotated dimensions";
}

}  // namespace vlattice
