// Product codes: the eigenvalue allocation, training (PCA start and OPQ), additive stages, encoding
// and its packing, on the CPU backend.
#include "product_sample.hpp"
#include "reference.hpp"
#include "support.hpp"

#include "codes/column_block.hpp"
#include "codes/eigenvalue_allocation.hpp"
#include "codes/procrustes.hpp"
#include "codes/product_error.hpp"
#include "vlattice/cpu_backend.hpp"
#include "vlattice/product_codes.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

using namespace vlattice;
using namespace vlattice::test;
using Catch::Contains;

namespace {

// Gaussian vectors with strongly correlated, unequally scaled coordinates: x = A g.
Matrix correlated_gaussian(std::size_t n, std::size_t d, std::mt19937_64& rng) {
    std::normal_distribution<float> normal;
    Matrix mix(d, d);
    for (std::size_t k = 0; k < d; ++k) {
        for (std::size_t l = 0; l < d; ++l) {
            mix.row(k)[l] = normal(rng) / static_cast<float>(1 + l);
        }
    }
    Matrix x(n, d);
    std::vector<float> g(d);
    for (std::size_t i = 0; i < n; ++i) {
        for (float& v : g) {
            v = normal(rng);
        }
        for (std::size_t k = 0; k < d; ++k) {
            float sum = 0.0f;
            for (std::size_t l = 0; l < d; ++l) {
                sum += mix.row(k)[l] * g[l];
            }
            x.row(i)[k] = sum;
        }
    }
    return x;
}

// Points with anchors near them, each point on its nearest anchor.
struct Anchored {
    Matrix points;
    Matrix anchors;
    std::vector<std::uint32_t> assignments;
};

Anchored anchored(Matrix points, std::size_t m, std::mt19937_64& rng) {
    Anchored a;
    a.anchors = anchors_near(points, m, rng);
    a.assignments = reference_assign(points, a.anchors).assignment;
    a.points = std::move(points);
    return a;
}

ProductCodeConfig product_config(std::size_t subspaces, unsigned bits, int opq_iters, std::uint64_t seed) {
    ProductCodeConfig config;
    config.subspaces = subspaces;
    config.bits = bits;
    config.opq_iters = opq_iters;
    config.train_sample = 0;
    config.kmeans.seed = seed;
    return config;
}

// The largest |R R^T - I| entry, in double.
double orthonormality_error(const Matrix& rotation) {
    double worst = 0.0;
    for (std::size_t s = 0; s < rotation.rows; ++s) {
        for (std::size_t t = 0; t < rotation.rows; ++t) {
            double dot = 0.0;
            for (std::size_t k = 0; k < rotation.cols; ++k) {
                dot += static_cast<double>(rotation.row(s)[k]) * rotation.row(t)[k];
            }
            worst = std::max(worst, std::abs(dot - (s == t ? 1.0 : 0.0)));
        }
    }
    return worst;
}

// Mean squared distance between the points and their decoded codes, in double.
double decode_error(const Anchored& a, const ProductCodes& codes) {
    std::vector<float> y(a.points.cols);
    double sum = 0.0;
    for (std::size_t i = 0; i < a.points.rows; ++i) {
        decode_product_row(a.anchors, codes, a.assignments[i], i, y.data());
        for (std::size_t k = 0; k < y.size(); ++k) {
            const double diff = static_cast<double>(y[k]) - a.points.row(i)[k];
            sum += diff * diff;
        }
    }
    return sum / static_cast<double>(a.points.rows);
}

// The distinct values code j takes over the coded vectors.
std::set<unsigned> codes_used(const ProductCodes& coded, std::size_t j) {
    std::set<unsigned> used;
    const std::size_t n = coded.codes.size() / coded.book.code_bytes();
    for (std::size_t i = 0; i < n; ++i) {
        used.insert(product_code(coded.codes.data() + i * coded.book.code_bytes(), coded.book.bits, j));
    }
    return used;
}

ProductCodes trained_codes(const Anchored& a, const ProductCodeConfig& config, Backend& backend) {
    ProductCodes codes;
    codes.book = train_product_codebook(a.points, a.anchors, a.assignments, config, backend);
    codes.codes = encode_product(codes.book, a.points, a.anchors, a.assignments, backend);
    return codes;
}

// Every sub-space's code checked against the brute-force nearest centroid (ties to the lowest id)
// of the rotated residual.
void require_nearest_codes(const Anchored& a, const ProductCodes& codes) {
    const ProductCodebook& book = codes.book;
    const Matrix rotated = rotate_residuals(book, a.points, a.anchors, a.assignments);
    for (std::size_t j = 0; j < book.subspaces(); ++j) {
        const std::size_t first = book.bounds[j];
        const std::size_t width = book.bounds[j + 1] - first;
        const ReferenceAssign nearest =
            reference_assign(column_block(rotated, first, width), column_block(book.centroids, first, width));
        for (std::size_t i = 0; i < a.points.rows; ++i) {
            INFO("vector " << i << ", sub-space " << j);
            REQUIRE(product_code(codes.codes.data() + i * book.code_bytes(), book.bits, j) ==
                    nearest.assignment[i]);
        }
    }
}

}  // namespace

TEST_CASE("the eigenvalue allocation balances the sub-spaces' products of eigenvalues", "[product]") {
    // 100 and 50 open the two sub-spaces; 10 joins 50 (500 < 100), then 5 goes where room is left.
    CHECK(allocate_eigenvalues({100, 50, 10, 5}, 2) == std::vector<std::vector<std::size_t>>{{0, 3}, {1, 2}});
    // 7 directions over 3 sub-spaces: sizes 3, 2, 2, every direction once.
    const auto directions = allocate_eigenvalues({64, 32, 16, 8, 4, 2, 1}, 3);
    REQUIRE(directions.size() == 3);
    CHECK(directions[0].size() == 3);
    CHECK(directions[1].size() == 2);
    CHECK(directions[2].size() == 2);
    std::set<std::size_t> all;
    for (const auto& d : directions) {
        all.insert(d.begin(), d.end());
    }
    CHECK(all.size() == 7);
    // Rounding noise below zero must not break the allocation.
    CHECK(allocate_eigenvalues({1.0, 0.0, -1e-18}, 3) == std::vector<std::vector<std::size_t>>{{0}, {1}, {2}});
}

TEST_CASE("rotated residuals are each coordinate's products summed in k order", "[product]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    std::normal_distribution<float> normal;
    // Shapes that fill no block of rows and no tile of coordinates evenly; the larger set is rotated
    // on two threads (n d p >= kParallelValues).
    for (const std::size_t n : {21, 4001}) {
        const Anchored a = anchored(random_points(n, 37, rng), 5, rng);
        ProductCodebook book;
        book.rotation = Matrix(35, 37);
        for (float& v : book.rotation.data) {
            v = normal(rng);
        }
        auto backend = make_cpu_backend(2);  // sets the thread count
        const Matrix z = rotate_residuals(book, a.points, a.anchors, a.assignments);
        REQUIRE(z.rows == n);
        REQUIRE(z.cols == 35);
        for (std::size_t i = 0; i < n; ++i) {
            const float* c = a.anchors.row(a.assignments[i]);
            std::vector<float> expected(35);
            for (std::size_t t = 0; t < 35; ++t) {
                float sum = 0.0f;
                for (std::size_t k = 0; k < 37; ++k) {
                    sum = sum + book.rotation.row(t)[k] * (a.points.row(i)[k] - c[k]);
                }
                expected[t] = sum;
            }
            INFO("row " << i);
            REQUIRE(std::vector<float>(z.row(i), z.row(i) + 35) == expected);
        }
    }
}

TEST_CASE("trained rotations have orthonormal rows and balanced sub-spaces", "[product]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    const Anchored a = anchored(correlated_gaussian(1500, 26, rng), 4, rng);
    auto backend = make_cpu_backend(1);
    for (const int opq_iters : {0, 3}) {
        INFO("opq_iters " << opq_iters);
        const ProductCodebook book =
            train_product_codebook(a.points, a.anchors, a.assignments, product_config(6, 4, opq_iters, s), *backend);
        REQUIRE(book.coded_dims() == 26);
        REQUIRE(book.rotation.cols == 26);
        CHECK(orthonormality_error(book.rotation) <= 1e-6);
        // 26 = 6 * 4 + 2: the first two sub-spaces hold 5 coordinates, the others 4.
        CHECK(book.bounds == std::vector<std::uint32_t>{0, 5, 10, 14, 18, 22, 26});
        CHECK(book.centroids.rows == 16);
        CHECK(book.centroids.cols == 26);
        CHECK(book.code_bytes() == 3);
    }
}

TEST_CASE("coordinates without variance are left uncoded unless the sub-spaces need them", "[product]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    Matrix x = correlated_gaussian(800, 12, rng);
    // Like an image's border: three coordinates equal in every vector and every anchor.
    const auto flatten = [](Matrix& rows) {
        for (std::size_t i = 0; i < rows.rows; ++i) {
            for (const std::size_t k : {0, 5, 11}) {
                rows.row(i)[k] = 3.0f;
            }
        }
    };
    flatten(x);
    Anchored a = anchored(std::move(x), 3, rng);
    flatten(a.anchors);
    a.assignments = reference_assign(a.points, a.anchors).assignment;
    auto backend = make_cpu_backend(1);
    const ProductCodes coded = trained_codes(a, product_config(3, 4, 1, s), *backend);
    CHECK(coded.book.coded_dims() == 9);
    CHECK(orthonormality_error(coded.book.rotation) <= 1e-6);
    require_nearest_codes(a, coded);

    // 11 sub-spaces need 11 coordinates: two carry no variance and cost nothing to code.
    const ProductCodes wide = trained_codes(a, product_config(11, 4, 1, s), *backend);
    CHECK(wide.book.coded_dims() == 11);
    CHECK(orthonormality_error(wide.book.rotation) <= 1e-6);
    require_nearest_codes(a, wide);
    CHECK(decode_error(a, wide) <= decode_error(a, coded) * 1.001);
}

TEST_CASE("small or flat training sets still give a complete codebook", "[product]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    auto backend = make_cpu_backend(1);
    // 100 residuals for 256 centroids: the fits find at most 100, the rest of the table copies
    // centroid 0, and every code is still the nearest centroid.
    const Anchored few = anchored(random_points(100, 10, rng), 4, rng);
    const ProductCodes coded = trained_codes(few, product_config(2, 8, 1, s), *backend);
    REQUIRE(coded.book.centroids.rows == 256);
    CHECK(std::equal(coded.book.centroids.row(0), coded.book.centroids.row(1), coded.book.centroids.row(255)));
    require_nearest_codes(few, coded);

    // Every vector is its own anchor: nothing to code, and decoding gives the anchors back.
    Anchored exact;
    exact.points = random_points(50, 8, rng);
    exact.anchors = exact.points;
    for (std::uint32_t i = 0; i < 50; ++i) {
        exact.assignments.push_back(i);
    }
    const ProductCodes flat = trained_codes(exact, product_config(3, 4, 1, s), *backend);
    CHECK(flat.book.coded_dims() == 3);
    CHECK(orthonormality_error(flat.book.rotation) <= 1e-6);
    CHECK(std::all_of(flat.codes.begin(), flat.codes.end(), [](std::uint8_t c) { return c == 0; }));
    CHECK(decode_error(exact, flat) == 0.0);

    // Under 8 residuals no row is left to judge OPQ's rounds on: every round runs, as with no early
    // stop at all.
    const Anchored seven = anchored(random_points(7, 6, rng), 1, rng);
    ProductCodeConfig judged = product_config(3, 4, 3, s);
    ProductCodeConfig every = judged;
    every.opq_min_gain = 0.0;
    const ProductCodebook kept =
        train_product_codebook(seven.points, seven.anchors, seven.assignments, judged, *backend);
    CHECK(kept.rotation.data ==
          train_product_codebook(seven.points, seven.anchors, seven.assignments, every, *backend).rotation.data);
}

TEST_CASE("a planted product code is recovered exactly", "[product]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    // Residuals on a grid: each of the 4 coordinates takes 4 levels, scaled differently per coordinate
    // so the principal directions are the coordinate axes, and every combination occurs equally often
    // around each anchor, so the residuals' second moment is exactly diagonal. Any pairing of the
    // coordinates into two sub-spaces then holds exactly 16 distinct points, one per centroid.
    const float levels[4] = {-3.0f, -1.0f, 1.0f, 3.0f};
    const float scale[4] = {8.0f, 0.5f, 2.0f, 1.0f};
    Anchored a;
    a.anchors = Matrix(2, 4);
    a.anchors.data = {10.0f, -20.0f, 30.0f, 5.0f, -7.0f, 3.0f, 12.0f, 40.0f};
    for (std::uint32_t anchor = 0; anchor < 2; ++anchor) {
        for (std::size_t combination = 0; combination < 256; ++combination) {
            std::vector<float> row(4);
            for (std::size_t k = 0; k < 4; ++k) {
                row[k] = a.anchors.row(anchor)[k] + scale[k] * levels[(combination >> (2 * k)) & 3];
            }
            a.points.data.insert(a.points.data.end(), row.begin(), row.end());
            a.assignments.push_back(anchor);
        }
    }
    a.points.rows = 512;
    a.points.cols = 4;
    auto backend = make_cpu_backend(1);
    for (const int opq_iters : {0, 2}) {
        INFO("opq_iters " << opq_iters);
        const ProductCodes coded = trained_codes(a, product_config(2, 4, opq_iters, s), *backend);
        REQUIRE(coded.book.coded_dims() == 4);
        std::vector<float> y(4);
        double worst = 0.0;
        for (std::size_t i = 0; i < a.points.rows; ++i) {
            decode_product_row(a.anchors, coded, a.assignments[i], i, y.data());
            for (std::size_t k = 0; k < 4; ++k) {
                worst = std::max(worst, static_cast<double>(std::abs(y[k] - a.points.row(i)[k])));
            }
        }
        CHECK(worst <= 1e-5);
        // Exact reconstruction with 16 centroids per sub-space: every centroid is one planted value.
        for (std::size_t j = 0; j < 2; ++j) {
            CHECK(codes_used(coded, j).size() == 16);
        }
    }
}

TEST_CASE("encoding gives the same bytes every time and on 1 or 2 threads", "[product]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    // Large enough (n d p >= kParallelValues) that the rotation runs in parallel on 2 threads; trained
    // on a sample.
    const Anchored a = anchored(random_points(2000, 48, rng), 16, rng);
    auto two = make_cpu_backend(2);
    ProductCodeConfig config = product_config(5, 8, 1, s);
    config.train_sample = 600;
    const ProductCodebook book = train_product_codebook(a.points, a.anchors, a.assignments, config, *two);
    const std::vector<std::uint8_t> codes = encode_product(book, a.points, a.anchors, a.assignments, *two);
    REQUIRE(codes.size() == 2000 * 5);
    CHECK(encode_product(book, a.points, a.anchors, a.assignments, *two) == codes);
    auto one = make_cpu_backend(1);
    CHECK(encode_product(book, a.points, a.anchors, a.assignments, *one) == codes);
    // Training too is a function of its input and seed.
    const ProductCodebook again = train_product_codebook(a.points, a.anchors, a.assignments, config, *one);
    CHECK(again.rotation.data == book.rotation.data);
    CHECK(again.centroids.data == book.centroids.data);
    CHECK(again.bounds == book.bounds);
}

TEST_CASE("codes are the nearest centroids and decoding rebuilds their reconstruction", "[product]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    const Anchored a = anchored(random_points(1200, 22, rng), 8, rng);
    auto backend = make_cpu_backend(1);
    const ProductCodes coded = trained_codes(a, product_config(5, 8, 1, s), *backend);
    const ProductCodebook& book = coded.book;
    require_nearest_codes(a, coded);

    // y = c + sum_t R[t] * zhat[t], in float in t order, from s = 0.
    std::vector<float> y(22), expected(22);
    for (std::size_t i = 0; i < a.points.rows; ++i) {
        std::fill(expected.begin(), expected.end(), 0.0f);
        const std::uint8_t* code = coded.codes.data() + i * book.code_bytes();
        for (std::size_t j = 0; j < book.subspaces(); ++j) {
            for (std::size_t t = book.bounds[j]; t < book.bounds[j + 1]; ++t) {
                const float z = book.centroids.row(product_code(code, book.bits, j))[t];
                for (std::size_t k = 0; k < 22; ++k) {
                    expected[k] = expected[k] + book.rotation.row(t)[k] * z;
                }
            }
        }
        for (std::size_t k = 0; k < 22; ++k) {
            expected[k] = a.anchors.row(a.assignments[i])[k] + expected[k];
        }
        decode_product_row(a.anchors, coded, a.assignments[i], i, y.data());
        INFO("vector " << i);
        REQUIRE(y == expected);
    }
}

TEST_CASE("encoding takes the first of the nearest centroids in double, in sub-spaces of any width",
          "[product]") {
    // Sub-spaces of 3, 16 and 21 coordinates; two rows at a time, and an odd one out. Centroids lie
    // far from the origin, 0.01 apart, where the fast float distances cannot tell them apart, and
    // centroid 9 repeats centroid 5: rows on centroid 5 tie.
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    std::normal_distribution<float> spread(0.0f, 0.01f);
    constexpr std::size_t d = 40;
    ProductCodebook book;
    book.bits = 8;
    book.bounds = {0, 3, 19, 40};
    book.rotation = Matrix(d, d);
    for (std::size_t t = 0; t < d; ++t) {
        book.rotation.row(t)[t] = 1.0f;
    }
    book.centroids = Matrix(book.table(), d);
    for (float& v : book.centroids.data) {
        v = 1000.0f + spread(rng);
    }
    std::copy(book.centroids.row(5), book.centroids.row(5) + d, book.centroids.row(9));
    Matrix points(301, d);
    for (std::size_t i = 0; i < points.rows; ++i) {
        for (std::size_t t = 0; t < d; ++t) {
            points.row(i)[t] = i % 7 == 0 ? book.centroids.row(5)[t] : 1000.0f + spread(rng);
        }
    }
    const Matrix anchors(1, d);
    const std::vector<std::uint32_t> assignments(points.rows, 0);
    const std::vector<std::uint8_t> codes = encode_product_on_cpu(book, points, anchors, assignments);
    for (std::size_t i = 0; i < points.rows; ++i) {
        for (std::size_t j = 0; j < book.subspaces(); ++j) {
            std::size_t best = 0;
            double least = std::numeric_limits<double>::infinity();
            for (std::size_t c = 0; c < book.table(); ++c) {
                double sum = 0.0;
                for (std::size_t t = book.bounds[j]; t < book.bounds[j + 1]; ++t) {
                    const double diff = static_cast<double>(points.row(i)[t]) - book.centroids.row(c)[t];
                    sum += diff * diff;
                }
                if (sum < least) {
                    least = sum;
                    best = c;
                }
            }
            INFO("vector " << i << ", sub-space " << j);
            REQUIRE(product_code(codes.data() + i * book.code_bytes(), book.bits, j) == best);
            if (i % 7 == 0) {
                CHECK(best == 5);
            }
        }
    }
}

// Rows mapped by a known rotation: Procrustes recovers it (OPQ's rounds are judged on rows they did
// not train on, so no error they report would show a wrong transpose).
TEST_CASE("the Procrustes rotation recovers a planted one", "[product]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    constexpr std::size_t d = 12;
    const Anchored a = anchored(correlated_gaussian(500, d, rng), 1, rng);
    const Matrix planted = train_product_codebook(a.points, a.anchors, a.assignments, product_config(4, 4, 0, s),
                                                  *make_cpu_backend(1))
                               .rotation;  // the PCA start: orthonormal rows
    REQUIRE(planted.rows == d);
    Matrix hidden(d, d);
    for (std::size_t t = 0; t < d; ++t) {  // the rows reversed: another orthogonal matrix
        std::copy(planted.row(d - 1 - t), planted.row(d - t), hidden.row(t));
    }
    Matrix mapped(a.points.rows, d);
    for (std::size_t i = 0; i < a.points.rows; ++i) {
        for (std::size_t t = 0; t < d; ++t) {
            double sum = 0.0;
            for (std::size_t k = 0; k < d; ++k) {
                sum += static_cast<double>(hidden.row(t)[k]) * a.points.row(i)[k];
            }
            mapped.row(i)[t] = static_cast<float>(sum);
        }
    }
    const Matrix found = procrustes_rotation(mapped, a.points);
    REQUIRE(found.rows == d);
    REQUIRE(found.cols == d);
    for (std::size_t e = 0; e < found.data.size(); ++e) {
        INFO("entry " << e);
        CHECK(std::abs(found.data[e] - hidden.data[e]) < 1e-4f);
    }
}

// A budget measures its product candidates, and OPQ judges its rounds, in the rotated space.
TEST_CASE("a product code's error in the rotated space is its decoded error", "[product]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    const Anchored a = anchored(correlated_gaussian(1200, 20, rng), 6, rng);
    auto backend = make_cpu_backend(2);
    struct Shape {
        std::size_t subspaces, rotated_dims, stages;
    };
    for (const Shape shape : {Shape{5, 0, 1}, Shape{4, 8, 1}, Shape{3, 0, 2}}) {
        INFO("M " << shape.subspaces << ", p " << shape.rotated_dims << ", stages " << shape.stages);
        ProductCodeConfig config = product_config(shape.subspaces, 4, 1, s);
        config.rotated_dims = shape.rotated_dims;
        config.stages = shape.stages;
        const ProductCodes codes = trained_codes(a, config, *backend);
        const double decoded = decode_error(a, codes);
        const double measured = product_mse(codes.book, a.points, a.anchors, a.assignments, *backend);
        INFO("decoded " << decoded << ", rotated " << measured);
        CHECK(std::abs(measured - decoded) <= 1e-5 * decoded);
    }
}

TEST_CASE("OPQ rounds stop before their next SVD once a round gains less than opq_min_gain", "[product]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    const Anchored a = anchored(correlated_gaussian(3000, 24, rng), 4, rng);
    auto backend = make_cpu_backend(2);
    // No round can gain 99.9 % of the error: the second round's steering fits stop the rounds, and
    // the final fit runs on the rotation of the first Procrustes step, as with one round, or on the
    // PCA start, as with none, when that step raised the error.
    ProductCodeConfig stopping = product_config(6, 8, 4, s);
    stopping.opq_min_gain = 0.999;
    ProductCodeConfig one_round = product_config(6, 8, 1, s);
    one_round.opq_min_gain = 0.0;
    const ProductCodebook stopped = train_product_codebook(a.points, a.anchors, a.assignments, stopping, *backend);
    const ProductCodebook once = train_product_codebook(a.points, a.anchors, a.assignments, one_round, *backend);
    const ProductCodebook none =
        train_product_codebook(a.points, a.anchors, a.assignments, product_config(6, 8, 0, s), *backend);
    const bool as_once = stopped.rotation.data == once.rotation.data && stopped.centroids.data == once.centroids.data;
    const bool as_none = stopped.rotation.data == none.rotation.data && stopped.centroids.data == none.centroids.data;
    CHECK((as_once || as_none));
    // Without the rule every round runs, and the rotation moves on.
    ProductCodeConfig every = product_config(6, 8, 4, s);
    every.opq_min_gain = 0.0;
    CHECK(train_product_codebook(a.points, a.anchors, a.assignments, every, *backend).rotation.data !=
          once.rotation.data);
    ProductCodeConfig bad = product_config(6, 8, 4, s);
    bad.opq_min_gain = 1.0;
    CHECK_THROWS_WITH(train_product_codebook(a.points, a.anchors, a.assignments, bad, *backend),
                      Catch::Contains("opq-min-gain must be in [0, 1)"));
}

TEST_CASE("4- and 12-bit codes pack least significant bit first, the spare nibble zero", "[product]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    struct Packing {
        unsigned bits;
        std::size_t subspaces, n, code_bytes;
        std::size_t least_used;  // distinct values each code takes, at least
    };
    // Five 4-bit codes (two per byte, low nibble first) and three 12-bit ones (across byte
    // boundaries): 20 and 36 bits, each leaving the last byte's high nibble spare. The 12-bit codes
    // take more values than a byte holds, so they are not 8-bit codes in wider fields.
    for (const Packing packing : {Packing{4, 5, 900, 3, 2}, Packing{12, 3, 6000, 5, 257}}) {
        INFO(packing.bits << " bits");
        const Anchored a = anchored(random_points(packing.n, 15, rng), 6, rng);
        auto backend = make_cpu_backend(2);
        const ProductCodes coded = trained_codes(a, product_config(packing.subspaces, packing.bits, 1, s), *backend);
        REQUIRE(coded.book.code_bytes() == packing.code_bytes);
        REQUIRE(coded.codes.size() == packing.n * packing.code_bytes);
        require_nearest_codes(a, coded);
        for (std::size_t i = 0; i < a.points.rows; ++i) {
            const std::uint8_t* code = coded.codes.data() + i * packing.code_bytes;
            for (std::size_t j = 0; j < packing.subspaces; ++j) {
                REQUIRE(product_code(code, packing.bits, j) == get_code(code, packing.bits, j));
            }
            REQUIRE((code[packing.code_bytes - 1] >> 4) == 0);
        }
        for (std::size_t j = 0; j < packing.subspaces; ++j) {
            CHECK(codes_used(coded, j).size() >= packing.least_used);
        }
    }
}

TEST_CASE("product-code training and encoding reject what they cannot do", "[product]") {
    const std::uint64_t s = seed();
    std::mt19937_64 rng(s);
    const Anchored a = anchored(random_points(300, 6, rng), 3, rng);
    auto backend = make_cpu_backend(1);
    const auto train = [&](std::size_t subspaces, unsigned bits) {
        return train_product_codebook(a.points, a.anchors, a.assignments, product_config(subspaces, bits, 0, s),
                                      *backend);
    };
    CHECK_THROWS_WITH(train(7, 8), Contains("subspaces is 7 but the vectors have only 6 dimensions"));
    CHECK_THROWS_WITH(train(0, 8), Contains("subspaces must be at least 1"));
    CHECK_THROWS_WITH(train(2, 6), Contains("pq-bits is 6"));
    CHECK_THROWS_WITH(train(2, 16), Contains("pq-bits is 16"));
    ProductCodeConfig no_stages = product_config(1, 8, 0, s);
    no_stages.stages = 0;
    CHECK_THROWS_WITH(train_product_codebook(a.points, a.anchors, a.assignments, no_stages, *backend),
                      Contains("stages must be at least 1"));
    ProductCodeConfig too_few_dims = product_config(2, 8, 0, s);
    too_few_dims.rotated_dims = 1;
    CHECK_THROWS_WITH(train_product_codebook(a.points, a.anchors, a.assignments, too_few_dims, *backend),
                      Contains("rotated_dims is 1; it must lie between the 2 sub-spaces and the dimension 6"));
    CHECK_THROWS_WITH(train_product_codebook(a.points, std::vector<std::uint32_t>{}, a.anchors, a.assignments,
                                             product_config(2, 8, 0, s), *backend),
                      Contains("no vectors to train product codes on"));
    ProductCodeConfig all_trimmed = product_config(1, 8, 0, s);
    all_trimmed.residual_trim = 1.0;
    CHECK_THROWS_WITH(train_product_codebook(a.points, a.anchors, a.assignments, all_trimmed, *backend),
                      Contains("residual_trim must be in [0, 1), got 1"));

    std::vector<std::uint32_t> wrong = a.assignments;
    wrong[17] = 3;
    CHECK_THROWS_WITH(train_product_codebook(a.points, a.anchors, wrong, product_config(2, 4, 0, s), *backend),
                      Contains("point 17 is assigned to anchor 3"));
    const ProductCodebook book = train(2, 4);
    CHECK_THROWS_WITH(encode_product(book, a.points, a.anchors, wrong, *backend),
                      Contains("point 17 is assigned to anchor 3"));
    ProductCodebook short_table = book;
    short_table.centroids.rows = 8;
    short_table.centroids.data.resize(8 * book.coded_dims());
    CHECK_THROWS_WITH(encode_product(short_table, a.points, a.anchors, a.assignments, *backend),
                      Contains("centroids are 8 x"));
    const Matrix narrow(300, 5);
    CHECK_THROWS_WITH(encode_product(book, narrow, a.anchors, a.assignments, *backend),
                      Contains("rotation has 6 columns for 5-dimensional vectors"));
}

namespace {

// Each stage's codes checked against the brute-force nearest centroid (ties to the lowest id) of what
// the stages before it left: the rotated residual less each chosen centroid, in float, stage by stage.
void require_greedy_stages(const Anchored& a, const ProductCodes& codes) {
    const ProductCodebook& book = codes.book;
    Matrix left = rotate_residuals(book, a.points, a.anchors, a.assignments);
    for (std::size_t stage = 0; stage < book.stages; ++stage) {
        Matrix centroids(book.table(), book.coded_dims());
        const float* first_row = book.centroids.row(stage * book.table());
        std::copy(first_row, first_row + centroids.data.size(), centroids.data.begin());
        for (std::size_t j = 0; j < book.subspaces(); ++j) {
            const std::size_t first = book.bounds[j];
            const std::size_t width = book.bounds[j + 1] - first;
            const ReferenceAssign nearest =
                reference_assign(column_block(left, first, width), column_block(centroids, first, width));
            for (std::size_t i = 0; i < a.points.rows; ++i) {
                INFO("vector " << i << ", stage " << stage << ", sub-space " << j);
                const unsigned code =
                    product_code(codes.codes.data() + i * book.code_bytes(), book.bits, stage * book.subspaces() + j);
                REQUIRE(code == nearest.assignment[i]);
                for (std::size_t t = first; t < first + width; ++t) {
                    left.row(i)[t] = left.row(i)[t] - centroids.row(code)[t];
                }
            }
        }
    }
}

}  // namespace

TEST_CASE("residual stages: a planted two-stage code is recovered exactly", "[product][stages]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    // Residuals c0[a] + c1[b] in 3 dimensions: 16 coarse points far apart (spacing 64) and 16 fine
    // offsets (within 1 of 0), every pair planted 3 times. Coding greedily, stage 0 can only pick the
    // coarse point and stage 1 the fine offset, once training has found both sets of 16.
    Matrix coarse(16, 3);
    Matrix offsets(16, 3);
    for (std::size_t c = 0; c < 16; ++c) {
        coarse.row(c)[0] = 64.0f * static_cast<float>(c % 4);
        coarse.row(c)[1] = 64.0f * static_cast<float>(c / 4);
        coarse.row(c)[2] = 0.0f;
        // Multiples of 1/8: every sum and mean below is exact in float.
        offsets.row(c)[0] = 0.5f * static_cast<float>(c % 4) - 0.75f;
        offsets.row(c)[1] = 0.5f * static_cast<float>(c / 4) - 0.75f;
        offsets.row(c)[2] = 0.125f * static_cast<float>(c % 5);
    }
    Anchored a;
    a.anchors = Matrix(1, 3);
    a.points = Matrix(16 * 16 * 3, 3);
    a.assignments.assign(a.points.rows, 0);
    for (std::size_t i = 0; i < a.points.rows; ++i) {
        const std::size_t pair = i / 3;
        for (std::size_t k = 0; k < 3; ++k) {
            a.points.row(i)[k] = coarse.row(pair / 16)[k] + offsets.row(pair % 16)[k];
        }
    }
    ProductCodeConfig config = product_config(1, 4, 0, s);
    config.stages = 2;
    // Plain means: a trimmed mean of a coarse cluster is not the point its members sit around.
    config.residual_trim = 0.0;
    auto backend = make_cpu_backend(1);
    const ProductCodes coded = trained_codes(a, config, *backend);
    REQUIRE(coded.book.stages == 2);
    REQUIRE(coded.book.code_bytes() == 1);
    require_greedy_stages(a, coded);
    CHECK(decode_error(a, coded) <= 1e-8);
    CHECK(codes_used(coded, 0).size() == 16);
    CHECK(codes_used(coded, 1).size() == 16);
}

TEST_CASE("residual stages: codes are greedy nearest centroids, each stage lowers the error", "[product][stages]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    const Anchored a = anchored(correlated_gaussian(1500, 24, rng), 8, rng);
    auto backend = make_cpu_backend(2);
    double previous = std::numeric_limits<double>::infinity();
    for (const std::size_t stages : {1, 2, 4}) {
        for (const std::size_t subspaces : {1, 3}) {
            INFO(stages << " stages of " << subspaces << " sub-spaces");
            ProductCodeConfig config = product_config(subspaces, 8, 1, s);
            config.stages = stages;
            config.kmeans.max_iters = 8;
            const ProductCodes coded = trained_codes(a, config, *backend);
            REQUIRE(coded.book.stages == stages);
            REQUIRE(coded.book.code_bytes() == stages * subspaces);
            CHECK(orthonormality_error(coded.book.rotation) <= 1e-6);
            require_greedy_stages(a, coded);
            if (subspaces == 1) {
                const double error = decode_error(a, coded);
                CHECK(error < previous);
                previous = error;
            }
        }
    }
}

TEST_CASE("residual stages: the same codes on 1 or 2 threads, and training is a function of its seed",
          "[product][stages]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    const Anchored a = anchored(random_points(2000, 48, rng), 16, rng);
    ProductCodeConfig config = product_config(2, 4, 1, s);
    config.stages = 3;
    config.kmeans.max_iters = 6;
    auto two = make_cpu_backend(2);
    auto one = make_cpu_backend(1);
    const ProductCodebook book = train_product_codebook(a.points, a.anchors, a.assignments, config, *two);
    const ProductCodebook again = train_product_codebook(a.points, a.anchors, a.assignments, config, *one);
    CHECK(again.centroids.data == book.centroids.data);
    CHECK(again.rotation.data == book.rotation.data);
    const std::vector<std::uint8_t> codes = encode_product(book, a.points, a.anchors, a.assignments, *two);
    REQUIRE(codes.size() == 2000 * 3);
    CHECK(encode_product(book, a.points, a.anchors, a.assignments, *one) == codes);
}

// compress trains on the rows it does not hold out by listing them; the codebook must be the one the
// same rows give when copied out, whatever the sample, and a list out of order or range is refused.
TEST_CASE("training on listed rows gives the codebook of those rows copied out", "[product]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    const Anchored a = anchored(correlated_gaussian(900, 12, rng), 5, rng);
    std::vector<std::uint32_t> rows;
    for (std::uint32_t i = 0; i < a.points.rows; ++i) {
        if (rng() % 3 != 0) {
            rows.push_back(i);
        }
    }
    std::vector<std::uint32_t> copied_assignments;
    for (const std::uint32_t i : rows) {
        copied_assignments.push_back(a.assignments[i]);
    }
    auto backend = make_cpu_backend(2);
    for (const std::size_t sample : {std::size_t{0}, std::size_t{250}}) {
        INFO("train_sample " << sample);
        ProductCodeConfig config = product_config(4, 8, 1, s);
        config.train_sample = sample;
        const ProductCodebook listed = train_product_codebook(a.points, rows, a.anchors, a.assignments, config, *backend);
        const ProductCodebook copied =
            train_product_codebook(select_rows(a.points, rows), a.anchors, copied_assignments, config, *backend);
        CHECK(listed.rotation.data == copied.rotation.data);
        CHECK(listed.centroids.data == copied.centroids.data);
    }
    const ProductCodeConfig config = product_config(4, 8, 1, s);
    std::vector<std::uint32_t> unordered = rows;
    std::swap(unordered[3], unordered[4]);
    CHECK_THROWS_WITH(train_product_codebook(a.points, unordered, a.anchors, a.assignments, config, *backend),
                      Contains("the training rows must increase and lie below 900; entry 4 is"));
    std::vector<std::uint32_t> beyond = rows;
    beyond.push_back(900);
    CHECK_THROWS_WITH(train_product_codebook(a.points, beyond, a.anchors, a.assignments, config, *backend),
                      Contains("entry " + std::to_string(rows.size()) + " is 900"));
}
