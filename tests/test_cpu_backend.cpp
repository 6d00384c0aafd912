// Each stage of the CPU backend against the brute-force double references, on random inputs of odd
// sizes: d not a multiple of 4 or 8, m = 1 and m = n, duplicate points and duplicate anchors.
#include "call_order.hpp"
#include "perturbed_backend.hpp"
#include "reference.hpp"
#include "support.hpp"

#include "vlattice/cpu_backend.hpp"

#include <catch2/catch.hpp>

#include <cstring>

using namespace vlattice;
using namespace vlattice::test;

TEST_CASE("assign, robust reduce, update and energy match the double reference", "[cpu][backend]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const auto d = GENERATE(as<std::size_t>{}, 1, 3, 13, 129);
    const auto n = GENERATE(as<std::size_t>{}, 1, 97, 1001);
    const auto m_kind = GENERATE(0, 1, 2);  // m = 1, m = 7 (or n if smaller), m = n
    const std::size_t m = m_kind == 0 ? 1 : m_kind == 1 ? std::min<std::size_t>(7, n) : n;
    const double trim = GENERATE(0.0, 0.1, 0.35);
    INFO("n " << n << " d " << d << " m " << m << " trim " << trim);

    const Matrix x = duplicated_points(n, d, rng);
    const Matrix c = anchors_near(x, m, rng);

    auto backend = make_cpu_backend(2);
    backend->upload_points(x, {});
    backend->upload_anchors(c);
    const AssignStats stats = backend->assign();
    const ReferenceAssign ref = reference_assign(x, c);
    CHECK(stats.changed == n);
    CHECK(backend->download_assignments() == ref.assignment);
    CHECK(close(stats.energy, ref.energy, 1e-12));
    CHECK(close(backend->energy(), ref.energy, 1e-12));
    CHECK(backend->assign().changed == 0);

    backend->robust_reduce(trim);
    const AnchorStats got = backend->download_stats();
    const ReferenceReduce want = reference_reduce(x, ref, m, trim);
    CHECK(got.count == want.count);
    CHECK(got.kept == want.kept);
    for (std::size_t j = 0; j < m; ++j) {
        INFO("anchor " << j);
        CHECK(close(got.variance[j], want.variance[j], 1e-6, 1e-6));
    }

    const double eta = 0.6;
    backend->update(eta);
    const Matrix moved = backend->download_anchors();
    for (std::size_t j = 0; j < m; ++j) {
        for (std::size_t k = 0; k < d; ++k) {
            const double expected = want.mean[j].empty() ? c.row(j)[k] : c.row(j)[k] + eta * (want.mean[j][k] - c.row(j)[k]);
            INFO("anchor " << j << " coordinate " << k);
            CHECK(close(moved.row(j)[k], expected, 1e-6, 1e-6));
        }
    }
}

TEST_CASE("assign is exact where the fast float distances nearly tie", "[cpu][backend]") {
    // Points on the perpendicular bisector of two anchors far from the origin: the float32 GEMM form
    // loses the difference entirely, the double re-scoring must still find the nearer anchor, and the
    // lower one on an exact tie.
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const NearTie tie = near_tie(rng);
    const Matrix& x = tie.points;
    const Matrix& c = tie.anchors;
    auto backend = make_cpu_backend(1);
    backend->upload_points(x, {});
    backend->upload_anchors(c);
    backend->assign();
    CHECK(backend->download_assignments() == reference_assign(x, c).assignment);
}

TEST_CASE("assign is exact at the small dimensions of sub-space fits, near ties included", "[cpu][backend]") {
    // Up to 16 dimensions the fast distances are computed directly, two points at a time and 32
    // anchors a register block; 17 takes the GEMM. An odd point count and 77 anchors leave tails of
    // both. Three anchors far from the origin nearly tie for every point (the float form loses their
    // difference), one of them duplicated; the rest lie on the other side.
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    std::uniform_real_distribution<float> jitter(-1e-3f, 1e-3f);
    for (const std::size_t d : {1, 3, 8, 12, 16, 17}) {
        INFO("d = " << d);
        Matrix x(513, d);
        Matrix c(77, d);
        for (std::size_t j = 0; j < c.rows; ++j) {
            for (std::size_t k = 0; k < d; ++k) {
                c.row(j)[k] = j < 3 ? 1000.0f : -1000.0f - static_cast<float>(j) + jitter(rng);
            }
        }
        c.row(1)[0] = 1000.5f;
        c.row(2)[0] = 1000.5f;
        for (std::size_t i = 0; i < x.rows; ++i) {
            for (std::size_t k = 0; k < d; ++k) {
                x.row(i)[k] = 1000.0f + (k == 0 ? 0.25f : 0.0f) + jitter(rng);
            }
        }
        auto backend = make_cpu_backend(2);
        backend->upload_points(x, {});
        backend->upload_anchors(c);
        backend->assign();
        CHECK(backend->download_assignments() == reference_assign(x, c).assignment);
    }
}

TEST_CASE("assigns that keep anchors by their bounds match the double reference after every change",
          "[cpu][backend]") {
    // Up to 16 dimensions an assign keeps a point's anchor without a scan while the bounds from the
    // last one prove it nearest, and settles the others from their anchor's neighbourhood. Updates of
    // every step size (a full step moves anchors with few members far), replaced rows, duplicated
    // points and duplicated anchors (exact ties, which no bound may settle) must leave every
    // assignment the double argmin, lowest id first, with its exact distance.
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    for (const std::size_t d : {2, 6, 12, 16}) {
        for (const std::size_t m : {std::size_t{40}, std::size_t{300}}) {
            INFO("d = " << d << ", m = " << m);
            const Matrix x = d == 6 ? duplicated_points(2001, d, rng) : random_points(2001, d, rng, 30);
            auto backend = make_cpu_backend(2);
            backend->upload_points(x, {});
            backend->seed_anchors(x, m, x.rows, run_seed);
            for (int round = 0; round < 12; ++round) {
                INFO("round " << round);
                backend->assign();
                const ReferenceAssign expected = reference_assign(x, backend->download_anchors());
                REQUIRE(backend->download_assignments() == expected.assignment);
                CHECK(backend->energy() == Approx(expected.energy).epsilon(1e-12));
                backend->robust_reduce(round % 3 == 0 ? 0.0 : 0.2 * unit(rng));
                backend->update(round % 4 == 0 ? 1.0 : unit(rng));
                if (round % 5 == 2) {
                    std::vector<std::uint32_t> rows = {static_cast<std::uint32_t>(round % m),
                                                       static_cast<std::uint32_t>((7 * round + 3) % m)};
                    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
                    std::vector<std::uint32_t> picks;
                    for (std::size_t r = 0; r < rows.size(); ++r) {
                        picks.push_back(static_cast<std::uint32_t>(rng() % x.rows));
                    }
                    backend->upload_anchor_rows(select_rows(x, picks), rows);
                }
                if (round % 5 == 4) {
                    // Anchor 1 becomes a copy of the last: the last's members tie, and the lower id wins.
                    const Matrix anchors = backend->download_anchors();
                    backend->upload_anchor_rows(select_rows(anchors, {static_cast<std::uint32_t>(m - 1)}), {1});
                }
            }
        }
    }
}

TEST_CASE("gather_members returns the first members of an anchor in point order", "[cpu][backend]") {
    std::mt19937_64 rng(seed());
    const Matrix x = random_points(50, 3, rng, 2);
    Matrix c(2, 3);
    std::memcpy(c.row(0), x.row(0), 3 * sizeof(float));
    std::memcpy(c.row(1), x.row(1), 3 * sizeof(float));
    auto backend = make_cpu_backend(1);
    backend->upload_points(x, {});
    backend->upload_anchors(c);
    backend->assign();
    const std::vector<std::uint32_t> a = backend->download_assignments();
    const Matrix members = backend->gather_members({1}, 4).at(0);
    std::size_t r = 0;
    for (std::size_t i = 0; i < x.rows && r < 4; ++i) {
        if (a[i] == 1) {
            CHECK(std::memcmp(members.row(r++), x.row(i), 3 * sizeof(float)) == 0);
        }
    }
    CHECK(members.rows == r);
    // A whole list at once gives what each anchor gives alone; an id past the anchors has no
    // members, and an anchor listed twice is refused.
    const std::vector<Matrix> both = backend->gather_members({1, 5, 0}, 4);
    REQUIRE(both.size() == 3);
    CHECK(both[0].data == members.data);
    CHECK(both[1].rows == 0);
    CHECK(both[2].data == backend->gather_members({0}, 4).at(0).data);
    CHECK_THROWS_AS(backend->gather_members({1, 0, 1}, 4), Error);
}

TEST_CASE("cpu: nearest_rows finds each row's nearest other row", "[cpu][backend]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const auto m = GENERATE(as<std::size_t>{}, 2, 3, 257);
    const Matrix c = random_points(m, 11, rng, 4);
    const NearestRows found = make_cpu_backend(1)->nearest_rows(c);
    REQUIRE(found.index.size() == m);
    REQUIRE(found.distance.size() == m);
    for (std::size_t j = 0; j < m; ++j) {
        double best = std::numeric_limits<double>::infinity();
        std::uint32_t best_k = 0;
        for (std::size_t k = 0; k < m; ++k) {
            const double dist = reference_distance(c, j, c, k);
            if (k != j && dist < best) {
                best = dist;
                best_k = static_cast<std::uint32_t>(k);
            }
        }
        CHECK(found.index[j] == best_k);
        CHECK(close(found.distance[j], best, 1e-12));
    }
    CHECK_THROWS_WITH(make_cpu_backend(1)->nearest_rows(Matrix(1, 11)), Catch::Contains("at least two rows"));
}

TEST_CASE("cpu: anchor rows go up and come down by id", "[cpu][backend]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const Matrix x = random_points(50, 6, rng, 3);
    const Matrix anchors = random_points(9, 6, rng, 3);
    auto cpu = make_cpu_backend(1);
    cpu->upload_points(x, {});
    cpu->upload_anchors(anchors);

    // Row r of the values replaces anchor rows[r]; the others stay.
    const std::vector<std::uint32_t> rows = {7, 2};
    const Matrix values = random_points(2, 6, rng, 3);
    cpu->upload_anchor_rows(values, rows);
    Matrix expected = anchors;
    std::memcpy(expected.row(7), values.row(0), 6 * sizeof(float));
    std::memcpy(expected.row(2), values.row(1), 6 * sizeof(float));
    CHECK(cpu->download_anchors().data == expected.data);
    CHECK(cpu->download_anchor_rows({2, 8, 2}).data == select_rows(expected, {2, 8, 2}).data);

    // Bad ids and shapes are refused, naming the call, before any row changes.
    CHECK_THROWS_WITH(cpu->upload_anchor_rows(select_rows(values, {0, 1, 0}), {1, 9, 3}),
                      Catch::Contains("upload_anchor_rows: row 9 is outside the 9 anchors"));
    CHECK_THROWS_WITH(cpu->upload_anchor_rows(values, {1}), Catch::Contains("one row of the anchors' dimension"));
    CHECK(cpu->download_anchors().data == expected.data);
    CHECK_THROWS_WITH(cpu->download_anchor_rows({0, 9}), Catch::Contains("download_anchor_rows: row 9 is outside"));
}

TEST_CASE("backend defaults: anchor rows and their spacing come from the downloaded anchors", "[cpu][backend]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const Matrix x = random_points(40, 5, rng, 3);
    const Matrix anchors = random_points(12, 5, rng, 3);
    // The decorator overrides neither call, so the Backend defaults run, on its (perturbed) anchors.
    test::PerturbedAnchors perturbed(make_cpu_backend(1));
    perturbed.upload_points(x, {});
    perturbed.upload_anchors(anchors);
    const Matrix seen = perturbed.download_anchors();
    REQUIRE(seen.data != anchors.data);
    const std::vector<std::uint32_t> live = {0, 3, 4, 11};
    CHECK(perturbed.download_anchor_rows(live).data == select_rows(seen, live).data);
    CHECK_THROWS_WITH(perturbed.download_anchor_rows({12}),
                      Catch::Contains("perturbed backend: download_anchor_rows: row 12 is outside the 12 anchors"));
    const NearestRows got = perturbed.nearest_anchors(live);
    const NearestRows want = make_cpu_backend(1)->nearest_rows(select_rows(seen, live));
    CHECK(got.index == want.index);
    CHECK(got.distance == want.distance);
}

TEST_CASE("cpu: calls out of order are reported as errors", "[cpu][backend]") {
    auto cpu = make_cpu_backend(1);
    check_call_order(*cpu);
    auto fresh = make_cpu_backend(1);
    CHECK_THROWS_AS(fresh->gather_members({0}, 4), Error);
}
