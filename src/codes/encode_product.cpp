// Encoding vectors with a product codebook (include/vlattice/product_codes.hpp).
#include "vlattice/product_codes.hpp"

#include "codes/residuals.hpp"
#include "cpu/direct_distances.hpp"
#include "cpu/distance_scan.hpp"
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

// A code is the first of its sub-space's centroids at the least distance in double, each summed over
// t in increasing order. Only the candidates are summed so: the centroids whose fast float distance
// lies within the rounding bound of the least (cpu/distance_scan.hpp). Per code, the fast distances
// need its centroids by dimension and their float norms.
struct FastTables {
    std::vector<std::vector<float>> columns;  // per code: width x table
    std::vector<std::vector<float>> norms;
    std::vector<float> max_norm;
};

FastTables fast_tables(const ProductCodebook& book) {
    FastTables tables;
    const std::size_t table = book.table();
    tables.columns.resize(book.codes());
    tables.norms.resize(book.codes());
    tables.max_norm.assign(book.codes(), 0.0f);
    for (std::size_t j = 0; j < book.codes(); ++j) {
        const std::size_t sub = j % book.subspaces();
        const std::size_t first = book.bounds[sub];
        const std::size_t width = book.bounds[sub + 1] - first;
        Matrix centroids(table, width);
        for (std::size_t c = 0; c < table; ++c) {
            const float* centroid = book.centroid(j, static_cast<unsigned>(c));
            std::copy(centroid + first, centroid + first + width, centroids.row(c));
            tables.norms[j].push_back(static_cast<float>(squared_norm(centroids.row(c), width)));
        }
        tables.columns[j] = cpu::anchor_columns(centroids);
        tables.max_norm[j] = *std::max_element(tables.norms[j].begin(), tables.norms[j].end());
    }
    return tables;
}

// The codes of rows u[0] and u[1] (the same row twice for an odd one out), stage by stage, into
// ids[p][0..S M); each u (p values) is left with what no stage coded.
VLATTICE_ALSO_FOR_X86_64_V3
void nearest_centroids(const ProductCodebook& book, const FastTables& fast, float* const u[2],
                       std::uint16_t* const ids[2]) {
    const std::size_t table = book.table();
    const std::size_t subspaces = book.subspaces();
    float distance[2][kMaxTable];
    std::uint32_t near[kMaxTable];
    const int rows = u[0] == u[1] ? 1 : 2;
    for (std::size_t j = 0; j < book.codes(); ++j) {
        const std::size_t stage = j / subspaces;
        const std::size_t sub = j % subspaces;
        const std::size_t first = book.bounds[sub];
        const std::size_t last = book.bounds[sub + 1];
        const std::size_t width = last - first;
        std::size_t best[2] = {0, 0};
        const float* x[2] = {u[0] + first, u[1] + first};
        const float x_norm[2] = {static_cast<float>(squared_norm(x[0], width)),
                                 static_cast<float>(squared_norm(x[1], width))};
        float* const row[2] = {distance[0], distance[1]};
        cpu::direct_distances(x, x_norm, fast.columns[j].data(), fast.norms[j].data(), width, table, row);
        const float factor = cpu::rounding_factor(width);
        for (int p = 0; p < rows; ++p) {
            const std::uint32_t least = cpu::first_least(row[p], table);
            const float threshold =
                row[p][least] + factor * (2.0f * x_norm[p] + fast.norms[j][least] + fast.max_norm[j]);
            const std::size_t count = cpu::within(row[p], table, threshold, near);
            double exact_best = std::numeric_limits<double>::infinity();
            best[p] = least;
            for (std::size_t k = 0; k < count; ++k) {
                const float* candidate = book.centroid(j, near[k]);
                double exact = 0.0;
                for (std::size_t t = first; t < last; ++t) {
                    const double diff = static_cast<double>(u[p][t]) - static_cast<double>(candidate[t]);
                    exact += diff * diff;
                }
                if (exact < exact_best) {
                    exact_best = exact;
                    best[p] = near[k];
                }
            }
        }
        for (int p = 0; p < rows; ++p) {
            ids[p][j] = static_cast<std::uint16_t>(best[p]);
            if (stage + 1 < book.stages) {
                const float* centroid = book.centroid(j, static_cast<unsigned>(best[p]));
                for (std::size_t t = first; t < last; ++t) {
                    u[p][t] = u[p][t] - centroid[t];
                }
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
    const FastTables fast = fast_tables(book);
    std::vector<std::uint16_t> ids(n * count);
#pragma omp parallel for schedule(static) if (n * book.coded_dims() * book.centroids.rows >= kParallelValues)
    for (std::size_t pair = 0; pair < (n + 1) / 2; ++pair) {
        const std::size_t i[2] = {2 * pair, std::min(2 * pair + 1, n - 1)};
        float* const u[2] = {rotated.row(i[0]), rotated.row(i[1])};
        std::uint16_t* const row_ids[2] = {ids.data() + i[0] * count, ids.data() + i[1] * count};
        nearest_centroids(book, fast, u, row_ids);
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
