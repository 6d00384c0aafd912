// k-NN over a compressed set on the CPU, against a brute force over the reconstruction.
#include "reference.hpp"
#include "support.hpp"

#include "numeric.hpp"
#include "vlattice/codec.hpp"
#include "vlattice/residual.hpp"
#include "vlattice/search.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
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

// The contract written out: the probed anchors by (distance, id), their members by (distance, id)
// to their reconstruction.
Neighbors brute_force(const VlatFile& file, const Matrix& queries, std::size_t k, std::size_t nprobe) {
    const Matrix y = reconstruct(file);
    const std::size_t m = file.anchors.rows;
    Neighbors out;
    out.queries = queries.rows;
    out.k = k;
    for (std::size_t q = 0; q < queries.rows; ++q) {
        std::vector<std::pair<float, std::uint32_t>> anchors;
        for (std::uint32_t j = 0; j < m; ++j) {
            anchors.emplace_back(static_cast<float>(ordered_squared_distance(queries.row(q), file.anchors.row(j), file.d)), j);
        }
        std::sort(anchors.begin(), anchors.end());
        std::set<std::uint32_t> probed;
        for (std::size_t r = 0; r < std::min(nprobe == 0 ? m : nprobe, m); ++r) {
            probed.insert(anchors[r].second);
        }
        std::vector<std::pair<float, std::uint32_t>> points;
        for (std::uint32_t i = 0; i < file.n; ++i) {
            if (probed.count(file.assignments[i])) {
                points.emplace_back(static_cast<float>(ordered_squared_distance(queries.row(q), y.row(i), file.d)), i);
            }
        }
        out.visited += points.size();
        std::sort(points.begin(), points.end());
        for (std::size_t r = 0; r < k; ++r) {
            out.ids.push_back(r < points.size() ? static_cast<std::int64_t>(points[r].second) : -1);
            out.distances.push_back(r < points.size() ? points[r].first : INFINITY);
        }
    }
    return out;
}

void check_same(const Neighbors& got, const Neighbors& want) {
    CHECK(got.queries == want.queries);
    CHECK(got.k == want.k);
    CHECK(got.visited == want.visited);
    REQUIRE(got.ids.size() == want.ids.size());
    std::size_t first = 0;
    while (first < got.ids.size() && got.ids[first] == want.ids[first] && got.distances[first] == want.distances[first]) {
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
