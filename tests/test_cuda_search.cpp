// The GPU's decoder and search against the CPU's reconstruct and search, bit for bit: dimensions 1
// to 784, 1 to 300 anchors (some of them empty), duplicate vectors and anchors (exact ties), codes of
// mixed widths, of width 0 only, and none, and product codes (with and without a re-rank). Every
// test skips with a warning where no usable GPU is present; those tagged [quick] are small enough
// for compute-sanitizer.
#include <catch2/catch.hpp>

#ifdef VLATTICE_HAVE_CUDA

#include "gpu_usable.hpp"
#include "product_file.hpp"
#include "support.hpp"

#include "vlattice/codec.hpp"
#include "vlattice/cuda_search.hpp"
#include "vlattice/residual.hpp"
#include "vlattice/search.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

using namespace vlattice;
using namespace vlattice::test;

namespace {

struct Shape {
    std::size_t n, d, m;
};

enum class Codes { mixed, zero_width, none };

const char* codes_name(Codes codes) {
    return codes == Codes::mixed ? "mixed widths" : codes == Codes::zero_width ? "width 0 only" : "no codes";
}

struct Compressed {
    VlatFile file;
    Matrix points;
};

// n vectors drawn around m anchors, each assigned the anchor it was drawn around; every third vector
// is a copy of an earlier one (same anchor, same code), and every fifth anchor from the sixth on a
// copy of the one before, so distances tie exactly. With m much larger than n / 3 some anchors have
// no members.
Compressed compressed(const Shape& s, Codes codes, std::mt19937_64& rng) {
    std::normal_distribution<float> normal;
    Compressed out;
    VlatFile& file = out.file;
    file.n = s.n;
    file.d = static_cast<std::uint32_t>(s.d);
    file.anchors = Matrix(s.m, s.d);
    for (std::size_t j = 0; j < s.m; ++j) {
        for (std::size_t k = 0; k < s.d; ++k) {
            file.anchors.row(j)[k] = j > 2 && j % 5 == 0 ? file.anchors.row(j - 1)[k] : 4.0f * normal(rng);
        }
    }
    out.points = Matrix(s.n, s.d);
    file.assignments.resize(s.n);
    std::uniform_int_distribution<std::uint32_t> pick(0, static_cast<std::uint32_t>(s.m - 1));
    for (std::size_t i = 0; i < s.n; ++i) {
        const bool copy = i > 2 && i % 3 == 0;
        file.assignments[i] = copy ? file.assignments[i / 3] : pick(rng);
        for (std::size_t k = 0; k < s.d; ++k) {
            out.points.row(i)[k] =
                copy ? out.points.row(i / 3)[k] : file.anchors.row(file.assignments[i])[k] + normal(rng);
        }
    }
    if (codes != Codes::none) {
        constexpr std::uint8_t kMixed[] = {8, 4, 2, 0};
        std::vector<std::uint8_t> widths(s.d, 0);
        for (std::size_t k = 0; codes == Codes::mixed && k < s.d; ++k) {
            widths[k] = kMixed[k % 4];
        }
        file.residuals = encode_residuals(out.points, file.anchors, file.assignments, widths);
        file.codec = ResidualCodec::scalar;
    }
    return out;
}

// Queries in four kinds: stored vectors, anchors (which tie with their copies), reconstructions
// (distance 0 to every copy) and fresh points.
Matrix queries_for(const Compressed& c, std::size_t count, std::mt19937_64& rng) {
    const Matrix reconstruction = reconstruct(c.file);
    const std::size_t d = c.points.cols;
    std::normal_distribution<float> normal;
    std::uniform_int_distribution<std::size_t> vector(0, c.points.rows - 1);
    std::uniform_int_distribution<std::size_t> anchor(0, c.file.anchors.rows - 1);
    Matrix q(count, d);
    for (std::size_t r = 0; r < count; ++r) {
        const float* source = r % 4 == 0 ? c.points.row(vector(rng))
                              : r % 4 == 1 ? c.file.anchors.row(anchor(rng))
                              : r % 4 == 2 ? reconstruction.row(vector(rng))
                                           : nullptr;
        for (std::size_t k = 0; k < d; ++k) {
            q.row(r)[k] = source != nullptr ? source[k] : 4.0f * normal(rng);
        }
    }
    return q;
}

// queries_for's kinds for an inner-product search, with every fifth query negated (products of the
// other sign) and the first the zero vector (every product +0: every vector ties).
Matrix ip_queries_for(const Compressed& c, std::size_t count, std::mt19937_64& rng) {
    Matrix q = queries_for(c, count, rng);
    for (std::size_t r = 4; r < count; r += 5) {
        for (std::size_t k = 0; k < q.cols; ++k) {
            q.row(r)[k] = -q.row(r)[k];
        }
    }
    std::fill(q.row(0), q.row(0) + q.cols, 0.0f);
    return q;
}

void check_same(const Matrix& got, const Matrix& want) {
    REQUIRE(got.rows == want.rows);
    REQUIRE(got.cols == want.cols);
    REQUIRE(got.data.size() == want.data.size());
    CHECK(std::memcmp(got.data.data(), want.data.data(), got.data.size() * sizeof(float)) == 0);
}

void check_same(const Neighbors& got, const Neighbors& want) {
    CHECK(got.queries == want.queries);
    CHECK(got.k == want.k);
    CHECK(got.visited == want.visited);
    REQUIRE(got.ids.size() == want.ids.size());
    REQUIRE(got.distances.size() == want.distances.size());
    std::size_t first = 0;
    while (first < got.ids.size() && got.ids[first] == want.ids[first] &&
           std::memcmp(&got.distances[first], &want.distances[first], sizeof(float)) == 0) {
        ++first;
    }
    if (first < got.ids.size()) {
        INFO("first difference at query " << first / got.k << ", rank " << first % got.k << ": id " << got.ids[first]
                                          << " distance " << got.distances[first] << ", expected id "
                                          << want.ids[first] << " distance " << want.distances[first]);
        CHECK(first == got.ids.size());
    }
}

// Every nprobe of {1, 4, all} with every k of {1, 10, 100}.
void check_searches(const VlatFile& file, const Matrix& queries) {
    for (const std::size_t nprobe : {std::size_t{1}, std::size_t{4}, std::size_t{0}}) {
        for (const std::size_t k : {std::size_t{1}, std::size_t{10}, std::size_t{100}}) {
            INFO("nprobe " << nprobe << " k " << k);
            SearchOptions options;
            options.k = k;
            options.nprobe = nprobe;
            check_same(search_cuda(file, queries, options), search(file, queries, options));
        }
    }
}

// check_searches on a file of shape s, with and without residual codes.
void check_searches_of_shape(const Shape& s) {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    const Codes codes = GENERATE(Codes::mixed, Codes::none);
    INFO("n " << s.n << " d " << s.d << " m " << s.m << ", " << codes_name(codes));
    std::mt19937_64 rng(run_seed ^ (s.n * 1000003 + s.d * 1009 + s.m));
    const Compressed c = compressed(s, codes, rng);
    check_searches(c.file, queries_for(c, 37, rng));
}

// One search of k = 10 for `count` queries on a file of shape s with residual codes.
void check_search_of_many(const Shape& s, std::size_t count, std::size_t nprobe) {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const Compressed c = compressed(s, Codes::mixed, rng);
    const Matrix queries = queries_for(c, count, rng);
    SearchOptions options;
    options.k = 10;
    options.nprobe = nprobe;
    check_same(search_cuda(c.file, queries, options), search(c.file, queries, options));
}

// check_searches by inner product on a file of shape s, with and without residual codes.
void check_ip_searches_of_shape(const Shape& s) {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    const Codes codes = GENERATE(Codes::mixed, Codes::none);
    INFO("n " << s.n << " d " << s.d << " m " << s.m << ", " << codes_name(codes) << ", metric ip");
    std::mt19937_64 rng(run_seed ^ (s.n * 1000003 + s.d * 1009 + s.m));
    Compressed c = compressed(s, codes, rng);
    c.file.metric = Metric::ip;
    check_searches(c.file, ip_queries_for(c, 37, rng));
}

// compressed(s, Codes::none)'s vectors, anchors and assignments under random product codes of `shape`.
Compressed product_compressed(const Shape& s, const ProductShape& shape, Metric metric, std::mt19937_64& rng) {
    Compressed c = compressed(s, Codes::none, rng);
    c.file = product_coded(c.points, c.file.anchors, c.file.assignments, shape, metric, rng, CodeChoice::random);
    return c;
}

// check_searches' nprobe and k, each without a re-rank and with re-ranks below, between and above
// the k.
void check_product_searches(const VlatFile& file, const Matrix& queries) {
    for (const std::size_t nprobe : {std::size_t{1}, std::size_t{4}, std::size_t{0}}) {
        for (const std::size_t k : {std::size_t{1}, std::size_t{10}, std::size_t{100}}) {
            for (const std::size_t rerank : {std::size_t{0}, std::size_t{7}, std::size_t{150}}) {
                INFO("nprobe " << nprobe << " k " << k << " rerank " << rerank);
                SearchOptions options;
                options.k = k;
                options.nprobe = nprobe;
                options.rerank = rerank;
                check_same(search_cuda(file, queries, options), search(file, queries, options));
            }
        }
    }
}

struct ProductCase {
    Shape shape;
    ProductShape product;
};

std::string product_case_name(const ProductCase& c, Metric metric) {
    return "n " + std::to_string(c.shape.n) + " d " + std::to_string(c.shape.d) + " m " +
           std::to_string(c.shape.m) + ", p " + std::to_string(c.product.p) + " M " +
           std::to_string(c.product.subspaces) + " x " + std::to_string(c.product.bits) + " bits, S " +
           std::to_string(c.product.stages) + ", " +
           metric_name(metric);
}

// check_product_searches on a product-coded file of case c, by L2 and by inner product.
void check_product_case(const ProductCase& c, std::size_t queries) {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    const Metric metric = GENERATE(Metric::l2, Metric::ip);
    INFO(product_case_name(c, metric));
    std::mt19937_64 rng(run_seed ^ (c.shape.n * 1000003 + c.shape.d * 1009 + c.shape.m));
    const Compressed p = product_compressed(c.shape, c.product, metric, rng);
    const Matrix q = metric == Metric::ip ? ip_queries_for(p, queries, rng) : queries_for(p, queries, rng);
    check_product_searches(p.file, q);
}

}  // namespace

TEST_CASE("cuda: reconstruct_cuda equals reconstruct bit for bit", "[gpu][search]") {
    if (!gpu_usable()) {
        return;
    }
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    const Shape s = GENERATE(Shape{1, 1, 1}, Shape{333, 3, 7}, Shape{2000, 17, 300}, Shape{20011, 1, 300},
                             Shape{20011, 784, 7}, Shape{5003, 784, 300});
    const Codes codes = GENERATE(Codes::mixed, Codes::zero_width, Codes::none);
    INFO("n " << s.n << " d " << s.d << " m " << s.m << ", " << codes_name(codes));
    std::mt19937_64 rng(run_seed ^ (s.n * 1000003 + s.d * 1009 + s.m));
    const Compressed c = compressed(s, codes, rng);
    check_same(reconstruct_cuda(c.file), reconstruct(c.file));
}

// The shapes and the splits below are cases of their own so that each runs in a compute-sanitizer
// process of its own (scripts/gpu-check): together, racecheck did not finish them in 420 s.
TEST_CASE("cuda: search_cuda equals search bit for bit", "[gpu][search]") {
    if (!gpu_usable()) {
        return;
    }
    check_searches_of_shape(GENERATE(Shape{1, 1, 1}, Shape{333, 1, 7}, Shape{1000, 3, 300}, Shape{20011, 3, 7},
                                     Shape{20011, 17, 300}));
}

TEST_CASE("cuda: search_cuda equals search bit for bit for 784 dimensions", "[gpu][search]") {
    if (!gpu_usable()) {
        return;
    }
    check_searches_of_shape(GENERATE(Shape{4999, 784, 7}, Shape{20011, 784, 300}, Shape{20011, 784, 1}));
}

// More candidates than one part of the device's work holds (2^25, cuda/search/search.cuh): 3,500 queries
// of 20,011 candidates each make three parts.
TEST_CASE("cuda: search_cuda splits many candidates into parts", "[gpu][search]") {
    if (!gpu_usable()) {
        return;
    }
    check_search_of_many(Shape{20011, 1, 7}, 3500, 0);
}

// More queries than one batch (2^24 / d) holds: 21,500 of dimension 784 make two batches.
TEST_CASE("cuda: search_cuda splits many queries into batches", "[gpu][search]") {
    if (!gpu_usable()) {
        return;
    }
    check_search_of_many(Shape{257, 784, 7}, 21500, 4);
}

TEST_CASE("cuda: decoder and search match the CPU on small shapes", "[gpu][search][quick]") {
    if (!gpu_usable()) {
        return;
    }
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    const Shape s = GENERATE(Shape{1, 1, 1}, Shape{333, 3, 7}, Shape{1000, 17, 300}, Shape{97, 784, 7});
    const Codes codes = GENERATE(Codes::mixed, Codes::zero_width, Codes::none);
    INFO("n " << s.n << " d " << s.d << " m " << s.m << ", " << codes_name(codes));
    std::mt19937_64 rng(run_seed ^ (s.n * 1000003 + s.d * 1009 + s.m));
    const Compressed c = compressed(s, codes, rng);
    check_same(reconstruct_cuda(c.file), reconstruct(c.file));
    check_searches(c.file, queries_for(c, 11, rng));
}

TEST_CASE("cuda: search_cuda by inner product equals search bit for bit", "[gpu][search][ip]") {
    if (!gpu_usable()) {
        return;
    }
    check_ip_searches_of_shape(GENERATE(Shape{1, 1, 1}, Shape{333, 1, 7}, Shape{1000, 3, 300}, Shape{20011, 17, 300},
                                        Shape{4999, 784, 7}, Shape{20011, 784, 300}));
}

TEST_CASE("cuda: search_cuda by inner product matches the CPU on small shapes, a zero query and padding",
          "[gpu][search][quick][ip]") {
    if (!gpu_usable()) {
        return;
    }
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    const Shape s = GENERATE(Shape{1, 1, 1}, Shape{333, 3, 7}, Shape{1000, 17, 300}, Shape{97, 784, 7});
    const Codes codes = GENERATE(Codes::mixed, Codes::zero_width, Codes::none);
    INFO("n " << s.n << " d " << s.d << " m " << s.m << ", " << codes_name(codes));
    std::mt19937_64 rng(run_seed ^ (s.n * 1000003 + s.d * 1009 + s.m));
    Compressed c = compressed(s, codes, rng);
    c.file.metric = Metric::ip;
    const Matrix queries = ip_queries_for(c, 11, rng);
    check_searches(c.file, queries);
    // Past every vector: -1 and -infinity, as on the CPU. The zero query ties every vector at +0
    // (never -0), lowest ids first.
    SearchOptions options;
    options.k = s.n + 3;
    options.nprobe = 0;
    const Neighbors got = search_cuda(c.file, queries, options);
    check_same(got, search(c.file, queries, options));
    CHECK(got.ids.back() == -1);
    CHECK(got.distances.back() == -std::numeric_limits<float>::infinity());
    for (std::size_t r = 0; r < s.n; ++r) {
        CHECK(got.ids[r] == static_cast<std::int64_t>(r));
        CHECK(got.distances[r] == 0.0f);
        CHECK_FALSE(std::signbit(got.distances[r]));
    }
}

TEST_CASE("cuda: search_cuda pads with -1 and infinity when fewer than k vectors are visited",
          "[gpu][search][quick]") {
    if (!gpu_usable()) {
        return;
    }
    std::mt19937_64 rng(seed());
    const Compressed c = compressed(Shape{40, 5, 7}, Codes::mixed, rng);
    const Matrix queries = queries_for(c, 9, rng);
    SearchOptions options;
    options.k = 100;
    options.nprobe = 1;
    const Neighbors got = search_cuda(c.file, queries, options);
    check_same(got, search(c.file, queries, options));
    REQUIRE(got.visited < queries.rows * options.k);
    CHECK(got.ids.back() == -1);
    CHECK(got.distances.back() == std::numeric_limits<float>::infinity());
}

TEST_CASE("cuda: search_cuda with no queries, no vectors or no anchors matches the CPU", "[gpu][search][quick]") {
    if (!gpu_usable()) {
        return;
    }
    std::mt19937_64 rng(seed());
    SearchOptions options;
    options.k = 3;
    const Compressed c = compressed(Shape{50, 4, 3}, Codes::mixed, rng);
    check_same(search_cuda(c.file, Matrix(0, 4), options), search(c.file, Matrix(0, 4), options));

    const Matrix queries = queries_for(c, 5, rng);
    VlatFile no_vectors;
    no_vectors.d = 4;
    no_vectors.anchors = c.file.anchors;
    check_same(search_cuda(no_vectors, queries, options), search(no_vectors, queries, options));
    check_same(reconstruct_cuda(no_vectors), reconstruct(no_vectors));

    VlatFile nothing;
    nothing.d = 4;
    nothing.anchors = Matrix(0, 4);
    check_same(search_cuda(nothing, queries, options), search(nothing, queries, options));
}

TEST_CASE("cuda: decoder and search reject what the CPU rejects, and codes that do not fit",
          "[gpu][search][quick]") {
    if (!gpu_usable()) {
        return;
    }
    std::mt19937_64 rng(seed());
    const Compressed c = compressed(Shape{50, 4, 3}, Codes::mixed, rng);
    SearchOptions options;
    CHECK_THROWS_AS(search_cuda(c.file, Matrix(2, 5), options), Error);
    options.k = 0;
    CHECK_THROWS_AS(search_cuda(c.file, Matrix(2, 4), options), Error);
    options.k = 1;

    VlatFile stray = c.file;
    stray.assignments[7] = 3;
    CHECK_THROWS_AS(reconstruct_cuda(stray), Error);
    CHECK_THROWS_AS(search_cuda(stray, Matrix(2, 4), options), Error);

    VlatFile short_codes = c.file;
    short_codes.residuals.codes.pop_back();
    CHECK_THROWS_AS(reconstruct_cuda(short_codes), Error);
    CHECK_THROWS_AS(search_cuda(short_codes, Matrix(2, 4), options), Error);
}

TEST_CASE("cuda: product-code search equals search bit for bit on small shapes", "[gpu][search][product][quick]") {
    if (!gpu_usable()) {
        return;
    }
    // 8-, 4- and 12-bit codes, an odd M of 4- and of 12-bit codes (their last byte half used), p < d
    // and p = d, additive stages of one sub-space and of several.
    check_product_case(GENERATE(ProductCase{{1, 1, 1}, {1, 1, 8}}, ProductCase{{333, 3, 7}, {3, 3, 4}},
                                ProductCase{{1000, 17, 300}, {12, 5, 4}}, ProductCase{{97, 384, 7}, {384, 48, 8}},
                                ProductCase{{1000, 33, 30}, {33, 1, 8, 6}}, ProductCase{{500, 17, 7}, {12, 3, 4, 3}},
                                ProductCase{{1000, 17, 30}, {15, 5, 12}}, ProductCase{{700, 33, 7}, {20, 2, 12, 2}}),
                       11);
}

TEST_CASE("cuda: product-code search equals search bit for bit", "[gpu][search][product]") {
    if (!gpu_usable()) {
        return;
    }
    check_product_case(GENERATE(ProductCase{{20011, 17, 300}, {17, 17, 8}},
                                ProductCase{{20011, 384, 300}, {384, 96, 4}},
                                ProductCase{{4999, 384, 7}, {320, 40, 8}}),
                       37);
}

// Tables of 350 code bytes (350 KiB per query) are more than a block's shared memory holds: the
// scan reads them where they are.
TEST_CASE("cuda: product-code search with tables too large for shared memory", "[gpu][search][product]") {
    if (!gpu_usable()) {
        return;
    }
    check_product_case(ProductCase{{3001, 784, 30}, {700, 350, 8}}, 9);
}

// 3,500 queries of 20,011 candidates each. At 8 code bytes they make one batch of three parts (2^25
// candidates each, cuda/search/search.cuh); at 48 code bytes (12,288 table values per query, against 2^24
// per batch), three batches of one part each.
TEST_CASE("cuda: product-code search splits many queries into parts and batches", "[gpu][search][product]") {
    if (!gpu_usable()) {
        return;
    }
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const std::size_t code_bytes = GENERATE(8, 48);
    INFO(code_bytes << " code bytes");
    const Compressed c =
        product_compressed(Shape{20011, 48, 7}, ProductShape{48, code_bytes, 8}, Metric::l2, rng);
    const Matrix queries = queries_for(c, 3500, rng);
    for (const std::size_t rerank : {std::size_t{0}, std::size_t{20}}) {
        INFO("rerank " << rerank);
        SearchOptions options;
        options.k = 10;
        options.nprobe = 0;
        options.rerank = rerank;
        check_same(search_cuda(c.file, queries, options), search(c.file, queries, options));
    }
}

#else

TEST_CASE("cuda search", "[gpu]") {
    WARN("skipped: built without CUDA");
}

#endif
