// k-NN over a compressed set on the CPU, against a brute force over the reconstruction.
#include "product_file.hpp"
#include "reference.hpp"
#include "support.hpp"

#include "codes/product_scan.hpp"
#include "numeric.hpp"
#include "search/anchor_probe.hpp"
#include "vlattice/codec.hpp"
#include "vlattice/io.hpp"
#include "vlattice/residual.hpp"
#include "vlattice/search.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

using namespace vlattice;
using namespace vlattice::test;
using Catch::Contains;

namespace {

VlatFile compressed(const Matrix& x, std::size_t m, unsigned width, std::mt19937_64& rng) {
    VlatFile file;
    file.n = x.rows;
    file.d = static_cast<std::uint32_t>(x.cols);
    file.anchors = anchors_near(x, m, rng);
    file.assignments = reference_assign(x, file.anchors).assignment;
    if (width > 0) {
        file.residuals = encode_residuals(x, file.anchors, file.assignments,
                                          std::vector<std::uint8_t>(x.cols, static_cast<std::uint8_t>(width)));
        file.codec = ResidualCodec::scalar;
    }
    return file;
}

// The contract's score, smallest first: the squared distance, or for ip the negated inner product
// (0 - dot, so that a zero product scores +0).
float contract_score(const VlatFile& file, const float* query, const float* row) {
    return file.metric == Metric::ip ? 0.0f - ordered_dot(query, row, file.d)
                                     : static_cast<float>(ordered_squared_distance(query, row, file.d));
}

// The contract written out: the probed anchors by (score, id), their members by (score, id) against
// their reconstruction; reported as squared distances, or for ip as inner products (-infinity for
// a missing neighbour).
// The nprobe anchors (all for 0) with the smallest (score, id) against the query, with their scores.
std::vector<std::pair<float, std::uint32_t>> probed_anchors(const VlatFile& file, const float* query, std::size_t nprobe) {
    const std::size_t m = file.anchors.rows;
    std::vector<std::pair<float, std::uint32_t>> anchors;
    for (std::uint32_t j = 0; j < m; ++j) {
        anchors.emplace_back(contract_score(file, query, file.anchors.row(j)), j);
    }
    std::sort(anchors.begin(), anchors.end());
    anchors.resize(std::min(nprobe == 0 ? m : nprobe, m));
    return anchors;
}

Neighbors brute_force(const VlatFile& file, const Matrix& queries, std::size_t k, std::size_t nprobe) {
    const Matrix y = reconstruct(file);
    const std::size_t m = file.anchors.rows;
    Neighbors out;
    out.queries = queries.rows;
    out.k = k;
    for (std::size_t q = 0; q < queries.rows; ++q) {
        std::set<std::uint32_t> probed;
        for (const auto& anchor : probed_anchors(file, queries.row(q), nprobe)) {
            probed.insert(anchor.second);
        }
        std::vector<std::pair<float, std::uint32_t>> points;
        for (std::uint32_t i = 0; i < file.n; ++i) {
            if (probed.count(file.assignments[i])) {
                points.emplace_back(contract_score(file, queries.row(q), y.row(i)), i);
            }
        }
        out.visited += points.size();
        std::sort(points.begin(), points.end());
        const bool ip = file.metric == Metric::ip;
        for (std::size_t r = 0; r < k; ++r) {
            out.ids.push_back(r < points.size() ? static_cast<std::int64_t>(points[r].second) : -1);
            out.distances.push_back(r < points.size() ? (ip ? 0.0f - points[r].first : points[r].first)
                                                      : (ip ? -INFINITY : INFINITY));
        }
    }
    return out;
}

void check_same(const Neighbors& got, const Neighbors& want) {
    CHECK(got.queries == want.queries);
    CHECK(got.k == want.k);
    CHECK(got.visited == want.visited);
    REQUIRE(got.ids.size() == want.ids.size());
    // Bit for bit: a -0 where +0 is due is a difference.
    std::size_t first = 0;
    while (first < got.ids.size() && got.ids[first] == want.ids[first] &&
           std::memcmp(&got.distances[first], &want.distances[first], sizeof(float)) == 0) {
        ++first;
    }
    INFO("first difference at query " << first / got.k << ", rank " << first % got.k);
    CHECK(first == got.ids.size());
    if (first < got.ids.size()) {
        CHECK(got.ids[first] == want.ids[first]);
        CHECK(got.distances[first] == want.distances[first]);
    }
}

}  // namespace

TEST_CASE("search returns the contract's neighbours, with and without codes, at every nprobe", "[search]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    for (const std::size_t d : {1, 5, 33}) {
        const Matrix x = duplicated_points(1200, d, rng);
        const Matrix queries = random_points(25, d, rng);
        for (const unsigned width : {0u, 2u, 8u}) {
            const VlatFile file = compressed(x, 17, width, rng);
            for (const std::size_t nprobe : {1, 3, 0}) {
                for (const std::size_t k : {1, 10, 100}) {
                    INFO("d " << d << ", width " << width << ", nprobe " << nprobe << ", k " << k);
                    check_same(search(file, queries, {k, nprobe}), brute_force(file, queries, k, nprobe));
                }
            }
        }
    }
}

TEST_CASE("search gives the same answer whatever blocks its decoded-list cache cuts the queries into", "[search]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    const Matrix x = duplicated_points(900, 7, rng);
    const Matrix queries = random_points(1500, 7, rng);  // more than one chunk of 1,024 queries
    const VlatFile file = compressed(x, 30, 4, rng);
    for (const std::size_t nprobe : {2, 0}) {
        for (const std::size_t cache : {std::size_t{0}, std::size_t{7 * 100}, std::size_t{64} << 20}) {
            INFO("nprobe " << nprobe << ", cache " << cache);
            SearchOptions options{5, nprobe};
            options.cache_floats = cache;
            check_same(search(file, queries, options), brute_force(file, queries, 5, nprobe));
        }
    }
}

TEST_CASE("search pads with -1 when fewer than k vectors are visited", "[search]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    const Matrix x = random_points(30, 4, rng);
    const VlatFile file = compressed(x, 10, 4, rng);
    // Every list is visited (nprobe 0): all 30 vectors fill the first places, -1 the other ten. With
    // one list, the query's nearest anchor may have no members at all (seed 741576904).
    const Neighbors found = search(file, random_points(3, 4, rng), {40, 0});
    for (std::size_t q = 0; q < 3; ++q) {
        CHECK(found.ids[q * 40 + 29] >= 0);
        CHECK(found.ids[q * 40 + 30] == -1);
        CHECK(found.ids[q * 40 + 39] == -1);
        CHECK(std::isinf(found.distances[q * 40 + 39]));
        CHECK(found.ids[q * 40] >= 0);
    }
    CHECK_THROWS_WITH(search(file, random_points(2, 5, rng), {10, 0}), Contains("5 dimensions"));
    CHECK_THROWS_WITH(search(file, random_points(2, 4, rng), {0, 0}), Contains("k must be at least 1"));
}

TEST_CASE("planted neighbours: 8-bit codes find every query's own point, anchors alone do not", "[search]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    // Distinct points of an integer grid: any two are at least 1 apart, far more than 8-bit codes move them.
    constexpr std::size_t d = 6;
    std::uniform_int_distribution<int> coordinate(0, 11);
    std::set<std::vector<int>> seen;
    Matrix x(3000, d);
    for (std::size_t i = 0; i < x.rows;) {
        std::vector<int> p(d);
        for (int& v : p) {
            v = coordinate(rng);
        }
        if (seen.insert(p).second) {
            std::copy(p.begin(), p.end(), x.row(i++));
        }
    }
    Matrix queries(200, d);
    IdMatrix truth(200, 1);
    std::uniform_int_distribution<std::size_t> any(0, x.rows - 1);
    for (std::size_t q = 0; q < queries.rows; ++q) {
        const std::size_t i = any(rng);
        std::copy(x.row(i), x.row(i) + d, queries.row(q));
        truth.row(q)[0] = static_cast<std::int64_t>(i);
    }
    const VlatFile with_codes = compressed(x, 64, 8, rng);
    CHECK(recall_at(search(with_codes, queries, {10, 0}), truth, 1) == 1.0);
    const VlatFile anchors_only = compressed(x, 64, 0, rng);
    CHECK(recall_at(search(anchors_only, queries, {10, 0}), truth, 1) < 0.5);
}

TEST_CASE("recall_at counts the true neighbours among the first k found", "[search]") {
    Neighbors found;
    found.queries = 2;
    found.k = 3;
    found.ids = {4, 7, 9, 1, -1, -1};
    found.distances = {0, 1, 2, 0, INFINITY, INFINITY};
    IdMatrix truth(2, 3);
    truth.data = {7, 4, 5, 1, 2, 3};
    CHECK(recall_at(found, truth, 1) == Approx(0.5));  // query 0 finds 4 first, not 7
    CHECK(recall_at(found, truth, 3) == Approx(3.0 / 6.0));
    CHECK_THROWS_WITH(recall_at(found, truth, 4), Contains("recall@4"));
}

namespace {

// Queries for an inner-product search: fresh points, their negations (every product negative), a
// copy of a stored vector and the zero vector (every product +0, so every vector ties).
Matrix ip_queries(const Matrix& x, std::size_t count, std::mt19937_64& rng) {
    Matrix queries = random_points(count, x.cols, rng);
    for (std::size_t q = 1; q < count; q += 4) {
        for (std::size_t k = 0; k < x.cols; ++k) {
            queries.row(q)[k] = -queries.row(q)[k];
        }
    }
    std::copy(x.row(7), x.row(7) + x.cols, queries.row(2));
    std::fill(queries.row(3), queries.row(3) + x.cols, 0.0f);
    return queries;
}

}  // namespace

TEST_CASE("search with metric ip returns the contract's neighbours: the largest inner products, ties to the lowest id",
          "[search][ip]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    for (const std::size_t d : {1, 5, 33}) {
        const Matrix x = duplicated_points(1200, d, rng);
        const Matrix queries = ip_queries(x, 25, rng);
        for (const unsigned width : {0u, 2u, 8u}) {
            VlatFile file = compressed(x, 17, width, rng);
            file.metric = Metric::ip;
            for (const std::size_t nprobe : {1, 3, 0}) {
                for (const std::size_t k : {1, 10, 100}) {
                    INFO("d " << d << ", width " << width << ", nprobe " << nprobe << ", k " << k);
                    check_same(search(file, queries, {k, nprobe}), brute_force(file, queries, k, nprobe));
                }
            }
            // The zero query ties every vector at a product of +0 (never -0): exhaustively, the
            // lowest ids come first.
            const Neighbors zero = search(file, queries, {5, 0});
            for (std::size_t r = 0; r < 5; ++r) {
                CHECK(zero.ids[3 * 5 + r] == static_cast<std::int64_t>(r));
                CHECK(zero.distances[3 * 5 + r] == 0.0f);
                CHECK_FALSE(std::signbit(zero.distances[3 * 5 + r]));
            }
        }
    }
}

TEST_CASE("search with metric ip ranks by the inner product computed in double on the reconstructions",
          "[search][ip]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    const std::size_t d = 12;
    const std::size_t k = 10;
    const Matrix x = random_points(800, d, rng);
    const Matrix queries = ip_queries(x, 40, rng);
    for (const unsigned width : {0u, 4u, 8u}) {
        INFO("width " << width);
        VlatFile file = compressed(x, 20, width, rng);
        file.metric = Metric::ip;
        const Matrix y = reconstruct(file);
        const Neighbors found = search(file, queries, {k, 0});
        for (std::size_t q = 0; q < queries.rows; ++q) {
            INFO("query " << q);
            std::vector<double> dot(y.rows);
            double scale = 0.0;  // bounds the float sum's rounding error
            for (std::size_t i = 0; i < y.rows; ++i) {
                double sum = 0.0;
                double magnitude = 0.0;
                for (std::size_t c = 0; c < d; ++c) {
                    sum += static_cast<double>(queries.row(q)[c]) * static_cast<double>(y.row(i)[c]);
                    magnitude += std::abs(static_cast<double>(queries.row(q)[c]) * static_cast<double>(y.row(i)[c]));
                }
                dot[i] = sum;
                scale = std::max(scale, magnitude);
            }
            const double tolerance = 1e-5 * scale;
            std::set<std::int64_t> taken;
            for (std::size_t r = 0; r < k; ++r) {
                const std::int64_t id = found.ids[q * k + r];
                REQUIRE(id >= 0);
                taken.insert(id);
                // The reported distance is the inner product itself, largest first.
                CHECK(std::abs(found.distances[q * k + r] - dot[static_cast<std::size_t>(id)]) <= tolerance);
                if (r > 0) {
                    CHECK(found.distances[q * k + r] <= found.distances[q * k + r - 1]);
                }
            }
            // No vector left out has a larger product than the last one taken.
            const double last = dot[static_cast<std::size_t>(found.ids[q * k + k - 1])];
            for (std::size_t i = 0; i < y.rows; ++i) {
                if (taken.count(static_cast<std::int64_t>(i)) == 0) {
                    CHECK(dot[i] <= last + tolerance);
                }
            }
        }
    }
}

TEST_CASE("search with metric ip pads with -1 and -infinity when fewer than k vectors are visited", "[search][ip]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    VlatFile file = compressed(random_points(30, 4, rng), 10, 4, rng);
    file.metric = Metric::ip;
    const Neighbors found = search(file, random_points(3, 4, rng), {40, 0});
    for (std::size_t q = 0; q < 3; ++q) {
        CHECK(found.ids[q * 40 + 29] >= 0);
        CHECK(std::isfinite(found.distances[q * 40 + 29]));
        CHECK(found.ids[q * 40 + 30] == -1);
        CHECK(found.distances[q * 40 + 30] == -std::numeric_limits<float>::infinity());
    }
}

TEST_CASE("ip search with 8-bit codes finds each query's largest true inner product, anchors alone do not",
          "[search][ip]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    const std::size_t d = 8;
    const Matrix x = random_points(3000, d, rng);
    const Matrix queries = random_points(300, d, rng);
    VlatFile with_codes = compressed(x, 64, 8, rng);
    with_codes.metric = Metric::ip;
    // A code moves a coordinate by at most `error`, so a product by at most |q|_1 error: a query
    // whose best product leads the second by more than twice that has one right answer.
    const Matrix y = reconstruct(with_codes);
    double error = 0.0;
    for (std::size_t e = 0; e < x.data.size(); ++e) {
        error = std::max(error, std::abs(static_cast<double>(x.data[e]) - static_cast<double>(y.data[e])));
    }
    std::vector<std::size_t> clear;
    std::vector<std::int64_t> best_ids;
    for (std::size_t q = 0; q < queries.rows; ++q) {
        double best = -INFINITY;
        double second = -INFINITY;
        std::size_t best_id = 0;
        double norm1 = 0.0;
        for (std::size_t c = 0; c < d; ++c) {
            norm1 += std::abs(static_cast<double>(queries.row(q)[c]));
        }
        for (std::size_t i = 0; i < x.rows; ++i) {
            double dot = 0.0;
            for (std::size_t c = 0; c < d; ++c) {
                dot += static_cast<double>(queries.row(q)[c]) * static_cast<double>(x.row(i)[c]);
            }
            if (dot > best) {
                second = best;
                best = dot;
                best_id = i;
            } else if (dot > second) {
                second = dot;
            }
        }
        if (best - second > 2.0 * norm1 * error + 1e-3 * std::abs(best)) {
            clear.push_back(q);
            best_ids.push_back(static_cast<std::int64_t>(best_id));
        }
    }
    INFO(clear.size() << " of " << queries.rows << " queries have one clear answer; code error " << error);
    REQUIRE(clear.size() >= queries.rows / 2);
    std::vector<std::uint32_t> rows(clear.begin(), clear.end());
    const Matrix clear_queries = select_rows(queries, rows);
    IdMatrix truth(clear.size(), 1);
    truth.data = best_ids;
    CHECK(recall_at(search(with_codes, clear_queries, {10, 0}), truth, 1) == 1.0);
    VlatFile anchors_only = compressed(x, 64, 0, rng);
    anchors_only.metric = Metric::ip;
    CHECK(recall_at(search(anchors_only, clear_queries, {10, 0}), truth, 1) < 0.5);
}

namespace {

// Rx in float, each coordinate summed over k in order from +0.
std::vector<float> rotated(const ProductCodebook& book, const float* x) {
    std::vector<float> out(book.coded_dims(), 0.0f);
    for (std::size_t t = 0; t < out.size(); ++t) {
        for (std::size_t k = 0; k < book.rotation.cols; ++k) {
            out[t] += book.rotation.row(t)[k] * x[k];
        }
    }
    return out;
}

// Q_j[c] of search.hpp: code j is sub-space j % M of stage j / M.
float subspace_value(const ProductCodebook& book, const std::vector<float>& rq, std::size_t j, unsigned c) {
    const std::size_t sub = j % book.subspaces();
    const float* centroid = book.centroids.row((j / book.subspaces() << book.bits) + c);
    float sum = 0.0f;
    for (std::size_t t = book.bounds[sub]; t < book.bounds[sub + 1]; ++t) {
        sum += rq[t] * centroid[t];
    }
    return sum;
}

// search.hpp's asymmetric score of vector i written out term by term, from its anchor's probe score.
float adc_reference(const VlatFile& file, float probe, const std::vector<float>& rq, const std::vector<float>& rc,
                    std::size_t i) {
    const ProductCodebook& book = file.product.book;
    const std::uint8_t* code = file.product.codes.data() + i * book.code_bytes();
    float sum = 0.0f;
    if (book.bits != 4) {
        for (std::size_t j = 0; j < book.codes(); ++j) {
            sum += subspace_value(book, rq, j, product_code(code, book.bits, j));
        }
    }
    for (std::size_t b = 0; book.bits == 4 && b < book.code_bytes(); ++b) {
        float table = 0.0f;
        if (2 * b + 1 < book.codes()) {
            table = subspace_value(book, rq, 2 * b, code[b] & 15u) + subspace_value(book, rq, 2 * b + 1, code[b] >> 4);
        } else {
            table = subspace_value(book, rq, 2 * b, code[b] & 15u);
        }
        sum += table;
    }
    if (file.metric == Metric::ip) {
        const float dot = (0.0f - probe) + sum;
        return std::isnan(dot) ? INFINITY : 0.0f - dot;
    }
    // z: stage 0's centroid values, each later stage's added in order.
    std::vector<float> z(book.coded_dims());
    for (std::size_t stage = 0; stage < book.stages; ++stage) {
        for (std::size_t j = 0; j < book.subspaces(); ++j) {
            const std::size_t code_j = stage * book.subspaces() + j;
            const float* centroid = book.centroids.row((stage << book.bits) + product_code(code, book.bits, code_j));
            for (std::size_t t = book.bounds[j]; t < book.bounds[j + 1]; ++t) {
                z[t] = stage == 0 ? centroid[t] : z[t] + centroid[t];
            }
        }
    }
    float e = 0.0f;
    for (std::size_t t = 0; t < z.size(); ++t) {
        e += z[t] * (z[t] + 2.0f * rc[t]);
    }
    const float x = (probe + e) - (sum + sum);
    return x > 0.0f ? x : std::isnan(x) ? INFINITY : 0.0f;
}

// The contract for product codes written out: brute_force's probes, the members ranked by
// adc_reference.
Neighbors brute_force_adc(const VlatFile& file, const Matrix& queries, std::size_t k, std::size_t nprobe) {
    const std::size_t m = file.anchors.rows;
    const bool ip = file.metric == Metric::ip;
    std::vector<std::vector<float>> rc;
    for (std::size_t j = 0; j < m; ++j) {
        rc.push_back(rotated(file.product.book, file.anchors.row(j)));
    }
    Neighbors out;
    out.queries = queries.rows;
    out.k = k;
    for (std::size_t q = 0; q < queries.rows; ++q) {
        const std::vector<std::pair<float, std::uint32_t>> anchors = probed_anchors(file, queries.row(q), nprobe);
        const std::vector<float> rq = rotated(file.product.book, queries.row(q));
        std::vector<std::pair<float, std::uint32_t>> points;
        for (const auto& [probe, j] : anchors) {
            for (std::uint32_t i = 0; i < file.n; ++i) {
                if (file.assignments[i] == j) {
                    points.emplace_back(adc_reference(file, probe, rq, rc[j], i), i);
                }
            }
        }
        out.visited += points.size();
        std::sort(points.begin(), points.end());
        for (std::size_t r = 0; r < k; ++r) {
            out.ids.push_back(r < points.size() ? static_cast<std::int64_t>(points[r].second) : -1);
            out.distances.push_back(r < points.size() ? (ip ? 0.0f - points[r].first : points[r].first)
                                                      : (ip ? -INFINITY : INFINITY));
        }
    }
    return out;
}

// A product-coded file of x around 17 anchors (some duplicated, so that scores tie), metric l2 or ip.
VlatFile product_file(const Matrix& x, const ProductShape& shape, Metric metric, std::mt19937_64& rng) {
    const Matrix anchors = anchors_near(x, 17, rng);
    return product_coded(x, anchors, reference_assign(x, anchors).assignment, shape, metric, rng);
}

SearchOptions options_of(std::size_t k, std::size_t nprobe, std::size_t rerank) {
    SearchOptions options;
    options.k = k;
    options.nprobe = nprobe;
    options.rerank = rerank;
    return options;
}

// Shapes of (d, p, M, bits, stages): p = d and p < d, odd and even M (4-bit codes share bytes in
// pairs, 12-bit codes cross them), additive stages of one and of several sub-spaces, and more
// stages (17) than the gathered scan holds (kMostScanStages), which takes the loop instead.
struct ProductCase {
    std::size_t d;
    ProductShape shape;
};
const ProductCase kProductCases[] = {
    {1, {1, 1, 8}},      {1, {1, 1, 4}},      {7, {5, 3, 4}},     {7, {5, 3, 8}},
    {33, {33, 11, 8}},   {33, {33, 12, 4}},   {33, {20, 7, 4}},   {33, {20, 7, 8}},
    {33, {33, 1, 8, 5}}, {33, {20, 3, 4, 3}}, {7, {7, 1, 4, 3}},  {7, {6, 2, 4, 17}},
    {7, {5, 3, 12}},     {33, {20, 4, 12}},   {9, {6, 1, 12, 3}},
};

}  // namespace

TEST_CASE("product codes: search returns the asymmetric-distance contract's neighbours", "[search][product]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    for (const ProductCase& c : kProductCases) {
        const Matrix x = duplicated_points(1200, c.d, rng);
        for (const Metric metric : {Metric::l2, Metric::ip}) {
            const VlatFile file = product_file(x, c.shape, metric, rng);
            Matrix queries = metric == Metric::ip ? ip_queries(x, 25, rng) : random_points(25, c.d, rng);
            // A query on a reconstruction: its l2 score rounds near 0.
            const Matrix y = reconstruct(file);
            std::copy(y.row(11), y.row(11) + c.d, queries.row(5));
            for (const std::size_t nprobe : {1, 3, 0}) {
                for (const std::size_t k : {1, 10, 100}) {
                    INFO("d " << c.d << ", p " << c.shape.p << ", M " << c.shape.subspaces << ", bits "
                              << c.shape.bits << ", stages " << c.shape.stages << ", " << metric_name(metric)
                              << ", nprobe " << nprobe << ", k " << k);
                    const Neighbors found = search(file, queries, options_of(k, nprobe, 0));
                    check_same(found, brute_force_adc(file, queries, k, nprobe));
                    for (const float distance : found.distances) {
                        CHECK_FALSE((distance == 0.0f && std::signbit(distance)));
                        CHECK((metric == Metric::ip || distance >= 0.0f));
                    }
                }
            }
        }
    }
}

TEST_CASE("product codes: the asymmetric distance is the distance to the reconstruction, up to rounding",
          "[search][product]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    for (const ProductCase& c : kProductCases) {
        const Matrix x = random_points(300, c.d, rng);
        for (const Metric metric : {Metric::l2, Metric::ip}) {
            INFO("d " << c.d << ", p " << c.shape.p << ", M " << c.shape.subspaces << ", bits " << c.shape.bits
                      << ", " << metric_name(metric));
            const VlatFile file = product_file(x, c.shape, metric, rng);
            const Matrix y = reconstruct(file);
            const Matrix queries = random_points(10, c.d, rng);
            const Neighbors found = search(file, queries, options_of(x.rows, 0, 0));
            for (std::size_t q = 0; q < queries.rows; ++q) {
                for (std::size_t r = 0; r < x.rows; ++r) {
                    const auto i = static_cast<std::size_t>(found.ids[q * x.rows + r]);
                    const float* query = queries.row(q);
                    const float* anchor = file.anchors.row(file.assignments[i]);
                    double exact = 0.0;
                    double scale = 0.0;  // bounds the float terms' rounding
                    for (std::size_t k = 0; k < c.d; ++k) {
                        const double qk = query[k];
                        const double yk = y.row(i)[k];
                        exact += metric == Metric::ip ? qk * yk : (qk - yk) * (qk - yk);
                        scale += (std::abs(qk) + std::abs(anchor[k]) + std::abs(yk)) *
                                 (std::abs(qk) + std::abs(anchor[k]) + std::abs(yk));
                    }
                    CHECK(std::abs(found.distances[q * x.rows + r] - exact) <= 1e-5 * scale);
                }
            }
        }
    }
}

TEST_CASE("product codes: re-ranking by the reconstruction", "[search][product]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    for (const ProductCase& c : kProductCases) {
        const Matrix x = duplicated_points(600, c.d, rng);
        for (const Metric metric : {Metric::l2, Metric::ip}) {
            const VlatFile file = product_file(x, c.shape, metric, rng);
            const Matrix y = reconstruct(file);
            const Matrix queries = metric == Metric::ip ? ip_queries(x, 20, rng) : random_points(20, c.d, rng);
            for (const std::size_t nprobe : {1, 3, 0}) {
                INFO("d " << c.d << ", p " << c.shape.p << ", M " << c.shape.subspaces << ", bits " << c.shape.bits
                          << ", " << metric_name(metric) << ", nprobe " << nprobe);
                // Every visited vector re-scored: the exact search over the reconstruction.
                for (const std::size_t k : {1, 10}) {
                    check_same(search(file, queries, options_of(k, nprobe, x.rows)),
                               brute_force(file, queries, k, nprobe));
                }
                // The best 20 by asymmetric distance, the 5 best of them by the reconstruction.
                const Neighbors adc = brute_force_adc(file, queries, 20, nprobe);
                Neighbors want;
                want.queries = queries.rows;
                want.k = 5;
                want.visited = adc.visited;
                for (std::size_t q = 0; q < queries.rows; ++q) {
                    std::vector<std::pair<float, std::int64_t>> rescored;
                    for (std::size_t r = 0; r < 20; ++r) {
                        const std::int64_t id = adc.ids[q * 20 + r];
                        if (id >= 0) {
                            rescored.emplace_back(
                                contract_score(file, queries.row(q), y.row(static_cast<std::size_t>(id))), id);
                        }
                    }
                    std::sort(rescored.begin(), rescored.end());
                    for (std::size_t r = 0; r < 5; ++r) {
                        const bool here = r < rescored.size();
                        want.ids.push_back(here ? rescored[r].second : -1);
                        const float score = here ? rescored[r].first : INFINITY;
                        want.distances.push_back(metric == Metric::ip ? (here ? 0.0f - score : -INFINITY) : score);
                    }
                }
                check_same(search(file, queries, options_of(5, nprobe, 20)), want);
                // A re-rank below k re-scores the k best.
                check_same(search(file, queries, options_of(10, nprobe, 3)),
                           search(file, queries, options_of(10, nprobe, 10)));
            }
        }
    }
}

TEST_CASE("product codes: an ip query of zeros ties every vector at +0, lowest ids first", "[search][product][ip]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    const Matrix x = random_points(200, 9, rng);
    for (const unsigned bits : {4u, 8u}) {
        const VlatFile file = product_file(x, {6, 3, bits}, Metric::ip, rng);
        const Neighbors found = search(file, Matrix(1, 9), options_of(5, 0, 0));
        for (std::size_t r = 0; r < 5; ++r) {
            CHECK(found.ids[r] == static_cast<std::int64_t>(r));
            CHECK(found.distances[r] == 0.0f);
            CHECK_FALSE(std::signbit(found.distances[r]));
        }
    }
}

TEST_CASE("product codes: query reads a version 3 file and returns what search returns", "[search][product][cli]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    const Matrix x = random_points(500, 12, rng);
    const Matrix queries = random_points(7, 12, rng);
    const ScratchDir dir;
    const std::string vlat = dir.path("product.vlat");
    const std::string query_file = dir.path("queries.fvecs");
    write_vectors(query_file, queries);
    for (const Metric metric : {Metric::l2, Metric::ip}) {
        write_vlat(vlat, product_file(x, {10, 5, 4}, metric, rng));
        const VlatFile file = read_vlat(vlat);
        for (const std::size_t rerank : {0, 30}) {
            INFO(metric_name(metric) << ", rerank " << rerank);
            const CommandResult run = run_cli("query " + quote(vlat) + " --queries " + quote(query_file) +
                                              " --k 5 --nprobe all --rerank " + std::to_string(rerank) +
                                              " --device cpu --json");
            INFO(run.output);
            REQUIRE(run.exit_code == 0);
            const nlohmann::json found = nlohmann::json::parse(run.output);
            CHECK(found["rerank"] == rerank);
            const Neighbors want = search(file, queries, options_of(5, 0, rerank));
            for (std::size_t q = 0; q < queries.rows; ++q) {
                for (std::size_t r = 0; r < 5; ++r) {
                    CHECK(found["ids"][q][r].get<std::int64_t>() == want.ids[q * 5 + r]);
                    CHECK(found["distances"][q][r].get<float>() == want.distances[q * 5 + r]);
                }
            }
        }
    }
}

// On a CPU with AVX2 the scan sums by gathers; the portable loop must give the same bits (on a CPU
// without it, both are the portable loop).
TEST_CASE("product codes: the scan's fastest sums equal the portable loop's", "[search][product]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    std::normal_distribution<float> normal;
    // Code bytes of 4- or 8-bit codes, and 12-bit codes whose indices take two bytes each.
    for (const ScanUnits units : {ScanUnits{1, kByteValues, 1}, ScanUnits{5, kByteValues, 1},
                                  ScanUnits{48, kByteValues, 1}, ScanUnits{3, 4096, 2}, ScanUnits{7, 4096, 2}}) {
        const std::size_t blocks = 37;
        std::uniform_int_distribution<unsigned> index(0, static_cast<unsigned>(units.values) - 1);
        std::vector<std::uint8_t> codes(blocks * units.count * kScanBlock * units.width);
        for (std::size_t e = 0; e < codes.size(); e += units.width) {
            const unsigned value = index(rng);
            codes[e] = static_cast<std::uint8_t>(value);
            if (units.width == 2) {
                codes[e + 1] = static_cast<std::uint8_t>(value >> 8);
            }
        }
        std::vector<float> tables(units.count * units.values);
        for (std::size_t e = 0; e < tables.size(); ++e) {
            // Magnitudes far apart, so that a different order of the adds would round differently.
            tables[e] = normal(rng) * (e % 3 == 0 ? 1e6f : 1e-3f);
        }
        std::vector<float> portable(blocks * kScanBlock);
        std::vector<float> fastest(blocks * kScanBlock);
        block_sums(codes.data(), blocks, units, tables.data(), portable.data());
        fastest_block_sums()(codes.data(), blocks, units, tables.data(), fastest.data());
        INFO(units.count << " lookups of " << units.values << " entries");
        CHECK(std::memcmp(portable.data(), fastest.data(), portable.size() * sizeof(float)) == 0);
    }
}

namespace {

// Every anchor's exact_score, the nprobe smallest by (score, id): what the probe must return.
std::vector<Scored> all_scored(const float* query, const Matrix& anchors, Metric metric, std::size_t nprobe) {
    std::vector<Scored> scored;
    for (std::size_t j = 0; j < anchors.rows; ++j) {
        scored.push_back({exact_score(query, anchors.row(j), anchors.cols, metric), static_cast<std::uint32_t>(j)});
    }
    keep_smallest(scored, nprobe);
    return scored;
}

}  // namespace

// Below every anchor the probe scores exactly only the anchors its GEMM's bounds cannot rule out; it
// must return what scoring all of them returns, bit for bit, near ties and far from them.
TEST_CASE("the probe's bounds return the anchors and scores of scoring every anchor", "[search]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    struct Case {
        const char* name;
        Matrix anchors;
        Matrix queries;
    };
    std::vector<Case> cases;
    cases.push_back({"random", random_points(300, 37, rng), random_points(70, 37, rng)});
    // Anchors repeated (exact ties, broken by id) and queries on anchors (scores of 0).
    Matrix repeated = duplicated_points(200, 16, rng);
    Matrix on_anchors(40, 16);
    for (std::size_t i = 0; i < on_anchors.rows; ++i) {
        std::copy(repeated.row(i * 3), repeated.row(i * 3) + 16, on_anchors.row(i));
    }
    cases.push_back({"repeated anchors", repeated, on_anchors});
    // Anchors a rounding apart: their exact scores differ in the last bits only.
    Matrix close(64, 24);
    const Matrix base = random_points(1, 24, rng);
    for (std::size_t j = 0; j < close.rows; ++j) {
        for (std::size_t k = 0; k < 24; ++k) {
            close.row(j)[k] = std::nextafter(base.row(0)[k], j % 2 ? 1e30f : -1e30f) * (1.0f + 1e-7f * (j % 5));
        }
    }
    cases.push_back({"a rounding apart", close, random_points(30, 24, rng)});
    // Far from the origin: the norms dwarf the distances, the GEMM's rounding is the window.
    Matrix far = random_points(150, 20, rng);
    Matrix far_queries = random_points(20, 20, rng);
    for (float& v : far.data) {
        v = 1e4f + v;
    }
    for (float& v : far_queries.data) {
        v = 1e4f + v;
    }
    cases.push_back({"far from the origin", far, far_queries});
    // Values near float's limits: the bounds cannot hold, every anchor is scored.
    Matrix huge = random_points(50, 8, rng);
    for (float& v : huge.data) {
        v *= 1e19f;
    }
    cases.push_back({"near overflow", huge, random_points(10, 8, rng)});
    Matrix tiny = random_points(50, 8, rng);
    for (float& v : tiny.data) {
        v *= 1e-30f;
    }
    cases.push_back({"subnormal products", tiny, random_points(10, 8, rng)});
    for (const Case& c : cases) {
        for (const Metric metric : {Metric::l2, Metric::ip}) {
            const AnchorProbe probe(c.anchors, metric);
            for (const std::size_t nprobe : {std::size_t{1}, std::size_t{3}, c.anchors.rows - 1, c.anchors.rows}) {
                INFO(c.name << ", " << metric_name(metric) << ", nprobe " << nprobe);
                std::vector<std::vector<Scored>> probes;
                probe.probe(c.queries, 0, c.queries.rows, nprobe, probes);
                for (std::size_t q = 0; q < c.queries.rows; ++q) {
                    const std::vector<Scored> want = all_scored(c.queries.row(q), c.anchors, metric, nprobe);
                    REQUIRE(probes[q].size() == want.size());
                    for (std::size_t r = 0; r < want.size(); ++r) {
                        REQUIRE(probes[q][r].second == want[r].second);
                        REQUIRE(std::memcmp(&probes[q][r].first, &want[r].first, sizeof(float)) == 0);
                    }
                }
            }
        }
    }
}

// A search computes each vector's e once its list is first probed: the same bits as computing all.
TEST_CASE("product codes: e computed list by list equals e computed for every vector", "[search][product]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    for (const ProductShape shape : {ProductShape{20, 5, 8}, ProductShape{14, 4, 12}, ProductShape{20, 3, 4, 3}}) {
        const Matrix x = random_points(700, 20, rng);
        const VlatFile file = product_file(x, shape, Metric::l2, rng);
        const ProductScan all = product_scan(file);
        ProductScan lazy = product_scan(file, false);
        const std::size_t m = file.anchors.rows;
        std::vector<std::uint8_t> wanted(m, 0);
        for (std::size_t a = 0; a < m; a += 3) {
            wanted[a] = 1;
        }
        add_extras(file, lazy, wanted);
        for (std::size_t a = 0; a < m; ++a) {
            for (std::size_t p = lazy.lists.start[a]; wanted[a] && p < lazy.lists.start[a + 1]; ++p) {
                REQUIRE(lazy.extra_done[p / kScanBlock] == 1);
                REQUIRE(std::memcmp(&lazy.extra[p], &all.extra[p], sizeof(float)) == 0);
            }
        }
        std::fill(wanted.begin(), wanted.end(), 1);
        add_extras(file, lazy, wanted);
        REQUIRE(lazy.extra.size() == all.extra.size());
        CHECK(std::memcmp(lazy.extra.data(), all.extra.data(), all.extra.size() * sizeof(float)) == 0);
    }
}
