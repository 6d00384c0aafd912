// Encoding vectors with a product codebook (include/vlattice/product_codes.hpp).
#include "vlattice/product_codes.hpp"

#include "codes/residuals.hpp"
#include "numeric.hpp"

#include <algorithm>
#include <limits>
#include <string>

namespace vlattice {

namespace {

// What encoding needs to stay within the codebook's arrays; check_product_codebook checks the rest.
void check_shape(const ProductCodebook& book, std::size_t d) {
    const auto fail = [](const std::string& what) { throw Error("encode_product: the codebook's " + what); };
    if (!is_product_code_bits(book.bits)) {
        fail("code width is " + std::to_string(book.bits) + " bits, not 4, 8 or 12");
    }
    if (book.empty() || book.bounds.front() != 0 || book.bounds.back() != book.coded_dims()) {
        fail("sub-space bounds do not run from 0 to its " + std::to_string(book.coded_dims()) + " coded dimensions");
    }
    for (std::size_t j = 0; j < book.subspaces(); ++j) {
        if (book.bounds[j + 1] <= book.bounds[j]) {
            fail("sub-space " + std::to_string(j) + " is empty or its bounds decrease");
        }
    }
    if (book.rotation.cols != d) {
        fail("rotation has " + std::to_string(book.rotation.cols) + " columns for " + std::to_string(d) +
             "-dimensional vectors");
    }
    if (book.stages == 0 || book.centroids.rows != book.stages * book.table() ||
        book.centroids.cols != book.coded_dims()) {
        fail("centroids are " + std::to_string(book.centroids.rows) + " x " + std::to_string(book.centroids.cols) +
             ", expected " + std::to_string(book.stages) + " stages x " + std::to_string(book.table()) + " x " +
             std::to_string(book.coded_dims()));
    }
}

constexpr std::size_t kMaxTable = std::size_t{1} << kProductCodeBits.back();

// The centroids transposed, p x S 2^b, so that one rotated coordinate meets every centroid's in a
// row and the distances of a stage's 2^b centroids add up side by side (each still in increasing t).
std::vector<double> transposed_centroids(const ProductCodebook& book) {
    const std::size_t rows = book.centroids.rows;
    const std::size_t p = book.coded_dims();
    std::vector<double> out(p * rows);
    for (std::size_t c = 0; c < rows; ++c) {
        for (std::size_t t = 0; t < p; ++t) {
            out[t * rows + c] = book.centroids.row(c)[t];
        }
    }
    return out;
}

// Row u's codes, stage by stage, into ids[0..S M); u (p values) is left with what no stage coded.
VLATTICE_ALSO_FOR_X86_64_V3
void nearest_centroids(const ProductCodebook& book, const std::vector<double>& columns, float* u, std::uint16_t* ids) {
    const std::size_t table = book.table();
    const std::size_t stride = book.centroids.rows;
    const std::size_t subspaces = book.subspaces();
    double distance[kMaxTable];  // 32 KB: within any thread's stack
    for (std::size_t j = 0; j < book.codes(); ++j) {
        const std::size_t stage = j / subspaces;
        const std::size_t sub = j % subspaces;
        std::fill(distance, distance + table, 0.0);
        for (std::size_t t = book.bounds[sub]; t < book.bounds[sub + 1]; ++t) {
            const double value = u[t];
            const double* column = columns.data() + t * stride + stage * table;
            for (std::size_t c = 0; c < table; ++c) {
                const double diff = value - column[c];
                distance[c] += diff * diff;
            }
        }
        std::size_t best = 0;
        for (std::size_t c = 1; c < table; ++c) {
            if (distance[c] < distance[best]) {
                best = c;
            }
        }
        ids[j] = static_cast<std::uint16_t>(best);
        if (stage + 1 < book.stages) {
            const float* centroid = book.centroid(j, static_cast<unsigned>(best));
            for (std::size_t t = book.bounds[sub]; t < book.bounds[sub + 1]; ++t) {
                u[t] = u[t] - centroid[t];
            }
        }
    }
}

}  // namespace

std::vector<std::uint8_t> pack_product_codes(const ProductCodebook& book, const std::vector<std::uint16_t>& ids,
                                             std::size_t n) {
    const std::size_t count = book.codes();
    const std::size_t bytes = book.code_bytes();
    std::vector<std::uint8_t> codes(n * bytes, 0);
#pragma omp parallel for schedule(static) if (n * count >= kParallelValues)
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint16_t* row = ids.data() + i * count;
        std::uint8_t* code = codes.data() + i * bytes;
        for (std::size_t j = 0; j < count; ++j) {
            const std::size_t bit = j * book.bits;
            const unsigned shifted = static_cast<unsigned>(row[j]) << (bit % 8);
            code[bit / 8] |= static_cast<std::uint8_t>(shifted);
            if (bit % 8 + book.bits > 8) {
                code[bit / 8 + 1] |= static_cast<std::uint8_t>(shifted >> 8);
            }
        }
    }
    return codes;
}

std::vector<std::uint8_t> encode_product_on_cpu(const ProductCodebook& book, const Matrix& points,
                                                const Matrix& anchors, const std::vector<std::uint32_t>& assignments) {
    const std::size_t n = points.rows;
    const std::size_t count = book.codes();
    Matrix rotated = rotate_residuals(book, points, anchors, assignments);
    const std::vector<double> columns = transposed_centroids(book);
    std::vector<std::uint16_t> ids(n * count);
#pragma omp parallel for schedule(static) if (n * book.coded_dims() * book.centroids.rows >= kParallelValues)
    for (std::size_t i = 0; i < n; ++i) {
        nearest_centroids(book, columns, rotated.row(i), ids.data() + i * count);
    }
    return pack_product_codes(book, ids, n);
}

std::vector<std::uint8_t> encode_product(const ProductCodebook& book, const Matrix& points, const Matrix& anchors,
                                         const std::vector<std::uint32_t>& assignments, Backend& backend,
                                         StageSeconds* seconds) {
    check_shape(book, points.cols);
    check_residual_inputs(points, anchors, assignments, "encode_product");
    if (points.rows == 0) {
        return {};
    }
    return timed(seconds, "codes", [&] { return backend.encode_product(book, points, anchors, assignments); });
}

}  // namespace vlattice
