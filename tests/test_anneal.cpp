// The annealing driver on the CPU backend: schedule, init, cold limit = Lloyd, determinism, edge
// sizes, robustness to outliers, and the final energy against a brute-force recomputation.
#include "perturbed_backend.hpp"
#include "reference.hpp"
#include "support.hpp"

#include "fit/init.hpp"
#include "numeric.hpp"
#include "vlattice/anneal.hpp"
#include "vlattice/cpu_backend.hpp"

#include <catch2/catch.hpp>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <limits>
#include <set>

using namespace vlattice;
using namespace vlattice::test;

namespace {

FitResult run(const Matrix& x, const AnnealConfig& config, int threads = 2) {
    auto backend = make_cpu_backend(threads);
    return fit(x, config, *backend);
}

// The final energy must be that of the returned anchors and assignments, and the assignments their
// argmin.
void check_consistent(const Matrix& x, const FitResult& result) {
    const ReferenceAssign ref = reference_assign(x, result.anchors);
    CHECK(result.assignments == ref.assignment);
    CHECK(close(result.energy, ref.energy, 1e-12));
}

}  // namespace

TEST_CASE("the schedule goes from hot to the Lloyd step", "[anneal]") {
    AnnealConfig c;
    c.t0 = 2.0;
    c.trim = 0.2;
    c.trim_final = 0.05;
    CHECK(trim_at(c, 2.0) == Approx(0.2));
    CHECK(trim_at(c, 1.0) == Approx(0.125));
    CHECK(trim_at(c, 0.0) == Approx(0.05));
    CHECK(eta_at(0.0) == 1.0);
    CHECK(eta_at(2.0) < eta_at(1.0));
    c.t0 = 0.0;
    CHECK(trim_at(c, 0.0) == Approx(0.05));
}

TEST_CASE("k-means++ picks distinct data points, the same ones for the same seed", "[anneal][init]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const Matrix x = random_points(500, 7, rng);
    const Matrix a = kmeans_plus_plus(x, 40, 200, run_seed);
    const Matrix b = kmeans_plus_plus(x, 40, 200, run_seed);
    CHECK(a.data == b.data);
    std::set<std::vector<float>> distinct;
    for (std::size_t j = 0; j < a.rows; ++j) {
        bool is_point = false;
        for (std::size_t i = 0; i < x.rows && !is_point; ++i) {
            is_point = std::memcmp(a.row(j), x.row(i), 7 * sizeof(float)) == 0;
        }
        CHECK(is_point);
        distinct.insert(std::vector<float>(a.row(j), a.row(j) + 7));
    }
    CHECK(distinct.size() == 40);
}

TEST_CASE("the pruned k-means++ picks what plain D^2 sampling picks", "[anneal][init]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const auto d = GENERATE(as<std::size_t>{}, 1, 5, 33);
    const std::size_t m = GENERATE(as<std::size_t>{}, 1, 17, 150);
    INFO("d " << d << " m " << m);
    Matrix x = random_points(1500, d, rng, 30);
    std::memcpy(x.row(7), x.row(8), d * sizeof(float));  // a duplicate point
    const std::size_t sample_size = 900;

    Random random(run_seed);
    const std::vector<std::size_t> sample = draw_sample(x.rows, sample_size, random);
    std::vector<double> nearest(sample.size(), std::numeric_limits<double>::infinity());
    Matrix expected(m, d);
    std::size_t chosen = random.below(sample.size());
    for (std::size_t j = 0; j < m; ++j) {
        std::memcpy(expected.row(j), x.row(sample[chosen]), d * sizeof(float));
        double total = 0.0;
        for (std::size_t i = 0; i < sample.size(); ++i) {
            nearest[i] = std::min<double>(nearest[i], ordered_squared_distance(x.row(sample[i]), expected.row(j), d));
            total += nearest[i];
        }
        const double target = random.uniform() * total;
        double running = 0.0;
        for (chosen = 0; chosen + 1 < sample.size(); ++chosen) {
            running += nearest[chosen];
            if (running > target && nearest[chosen] > 0.0) {
                break;
            }
        }
    }
    CHECK(kmeans_plus_plus(x, m, sample_size, run_seed).data == expected.data);
}

TEST_CASE("k-means++ picks the same anchors on any number of threads", "[anneal][init]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    // 20000 x 64 is past init.cpp's kParallelWork, so the first rounds run in parallel, with the
    // first anchor's long member list cut into spans for the threads.
    const Matrix x = random_points(20000, 64, rng, 30);
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    const Matrix one = kmeans_plus_plus(x, 60, x.rows, run_seed);
    omp_set_num_threads(4);
    const Matrix four = kmeans_plus_plus(x, 60, x.rows, run_seed);
    omp_set_num_threads(threads);
    CHECK(one.data == four.data);
}

TEST_CASE("cold and untrimmed, each iteration is exactly a Lloyd step", "[anneal]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const Matrix x = random_points(700, 11, rng, 6);
    AnnealConfig config;
    config.anchors = 9;
    config.t0 = 0.0;
    config.trim_final = 0.0;
    config.maintenance_every = 0;
    config.tolerance = 0.0;  // no stop before max_iters
    config.min_gain = 0.0;
    config.max_iters = 6;
    config.seed = run_seed;
    config.init_sample = x.rows;

    Matrix c = kmeans_plus_plus(x, config.anchors, x.rows, config.seed);
    std::vector<double> energies;
    for (int it = 0; it < config.max_iters; ++it) {
        const ReferenceAssign a = reference_assign(x, c);
        energies.push_back(a.energy);
        const ReferenceReduce r = reference_reduce(x, a, c.rows, 0.0);
        for (std::size_t j = 0; j < c.rows; ++j) {
            for (std::size_t k = 0; k < c.cols && !r.mean[j].empty(); ++k) {
                c.row(j)[k] = static_cast<float>(r.mean[j][k]);
            }
        }
    }
    const FitResult result = run(x, config);
    REQUIRE(result.history.size() == energies.size());
    for (std::size_t it = 0; it < energies.size(); ++it) {
        INFO("iteration " << it);
        CHECK(close(result.history[it].energy, energies[it], 1e-6));
        CHECK(result.history[it].eta == 1.0);
    }
    for (std::size_t j = 0; j < c.rows; ++j) {
        for (std::size_t k = 0; k < c.cols; ++k) {
            CHECK(close(result.anchors.row(j)[k], c.row(j)[k], 1e-5, 1e-5));
        }
    }
    check_consistent(x, result);
}

TEST_CASE("edge sizes: m = 1 gives the mean, m = n gives zero energy, duplicates shrink m", "[anneal]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    AnnealConfig config;
    config.seed = run_seed;
    config.max_iters = 30;

    SECTION("m = 1") {
        const Matrix x = random_points(301, 5, rng, 3);
        config.anchors = 1;
        const FitResult result = run(x, config);
        REQUIRE(result.anchors.rows == 1);
        for (std::size_t k = 0; k < 5; ++k) {
            double mean = 0.0;
            for (std::size_t i = 0; i < x.rows; ++i) {
                mean += x.row(i)[k];
            }
            CHECK(close(result.anchors.row(0)[k], mean / x.rows, 1e-5, 1e-5));
        }
        check_consistent(x, result);
    }
    SECTION("m = n, distinct points") {
        const Matrix x = random_points(40, 3, rng, 4);
        config.anchors = 40;
        const FitResult result = run(x, config);
        CHECK(result.anchors.rows == 40);
        CHECK(result.energy == 0.0);
        check_consistent(x, result);
    }
    SECTION("m = n with duplicate points") {
        Matrix x = random_points(30, 4, rng, 3);
        for (std::size_t i = 10; i < 30; ++i) {
            std::memcpy(x.row(i), x.row(i % 10), 4 * sizeof(float));  // 10 distinct points
        }
        config.anchors = 30;
        const FitResult result = run(x, config);
        CHECK(result.anchors.rows == 10);
        CHECK(result.dropped_empty == 20);
        CHECK(result.energy == 0.0);
        check_consistent(x, result);
    }
    SECTION("a single point") {
        const Matrix x = random_points(1, 2, rng, 1);
        config.anchors = 1;
        const FitResult result = run(x, config);
        CHECK(result.energy == 0.0);
        CHECK(result.assignments == std::vector<std::uint32_t>{0});
    }
}

TEST_CASE("same seed gives the same result, whatever the thread count", "[anneal]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const Matrix x = random_points(2000, 13, rng, 20);
    AnnealConfig config;
    config.anchors = 25;
    config.seed = run_seed;
    config.max_iters = 20;
    const FitResult a = run(x, config, 1);
    const FitResult b = run(x, config, 2);
    CHECK(a.anchors.data == b.anchors.data);
    CHECK(a.assignments == b.assignments);
    CHECK(a.energy == b.energy);
    config.seed = run_seed + 1;
    CHECK(run(x, config, 2).anchors.data != a.anchors.data);
}

TEST_CASE("the run converges, ends at a k-means fixed point and reports consistent energy", "[anneal]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const Matrix x = random_points(3000, 9, rng, 12);
    AnnealConfig config;
    config.anchors = 12;
    config.seed = run_seed;
    config.max_iters = 200;
    config.min_gain = 0.0;  // only a fixed point stops the run
    const FitResult result = run(x, config);
    CHECK(result.converged);
    CHECK_THAT(result.stop_reason, Catch::StartsWith("converged: energy and assignments changed by less than"));
    CHECK(result.iterations < config.max_iters);
    CHECK(result.history.back().temperature == 0.0);
    check_consistent(x, result);
    // A fixed point of Lloyd: every anchor is the mean of its members.
    const ReferenceReduce r = reference_reduce(x, reference_assign(x, result.anchors), result.anchors.rows, 0.0);
    for (std::size_t j = 0; j < result.anchors.rows; ++j) {
        for (std::size_t k = 0; k < x.cols; ++k) {
            CHECK(close(result.anchors.row(j)[k], r.mean[j][k], 1e-3, 1e-3));
        }
    }
}

namespace {

double gain(const FitResult& result, std::size_t iteration) {
    const double before = result.history[iteration - 1].energy;
    return (before - result.history[iteration].energy) / before;
}

}  // namespace

TEST_CASE("with default options a fit whose energy keeps creeping down stops once iterations stop paying", "[anneal]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    // Many anchors in one Gaussian: Lloyd's steps keep moving points between anchors for hundreds of
    // iterations, each gaining less than the one before.
    const Matrix x = random_points(20000, 8, rng, 1);
    AnnealConfig config;
    config.anchors = 100;
    config.seed = run_seed;
    const FitResult result = run(x, config);
    INFO(result.stop_reason);
    REQUIRE(result.converged);
    CHECK(result.iterations < config.max_iters);
    CHECK_THAT(result.stop_reason,
               Catch::StartsWith("converged: the energy gained less than 0.002 of itself per iteration for 3 iterations"));
    const std::size_t last = result.history.size() - 1;
    for (std::size_t k = last + 1 - static_cast<std::size_t>(config.patience); k <= last; ++k) {
        INFO("iteration " << k);
        CHECK(result.history[k].temperature == 0.0);
        CHECK(gain(result, k) < config.min_gain);
    }
    // Not a fixed point: the gain, not the assignments, stopped it.
    CHECK(static_cast<double>(result.history.back().changed) >= config.tolerance * static_cast<double>(x.rows));
    check_consistent(x, result);

    // What it left: all 50 iterations gain less than 2 % more (0.6-1.2 % over 8 seeds, after 17-18).
    config.min_gain = 0.0;
    const FitResult full = run(x, config);
    CHECK(full.iterations == config.max_iters);
    CHECK(result.energy <= 1.02 * full.energy);
    CHECK_THAT(full.stop_reason, Catch::StartsWith("reached the maximum of 50 iterations; the last gained "));
}

TEST_CASE("a hot run whose gains stop paying is quenched and then stops cold on its own", "[anneal]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const Matrix x = random_points(20000, 8, rng, 1);
    AnnealConfig config;
    config.anchors = 100;
    config.seed = run_seed;
    config.cooling = 0.01;  // by its schedule alone, T would stay above 0.6 for all 50 iterations
    const FitResult result = run(x, config);
    INFO(result.stop_reason);
    CHECK(result.converged);
    CHECK(result.iterations < config.max_iters);
    const auto cold = std::find_if(result.history.begin(), result.history.end(),
                                   [](const IterationRecord& r) { return r.temperature == 0.0; });
    REQUIRE(cold != result.history.end());
    const std::size_t quenched = static_cast<std::size_t>(cold - result.history.begin());
    REQUIRE(quenched >= 1 + static_cast<std::size_t>(config.patience));
    CHECK(result.history[quenched - 1].temperature > 0.5);
    // The quench came after `patience` hot iterations that gained too little...
    for (std::size_t k = quenched + 1 - static_cast<std::size_t>(config.patience); k <= quenched; ++k) {
        INFO("iteration " << k);
        CHECK(gain(result, k) < config.min_gain);
    }
    // ...and the run went on cold for at least `patience` iterations of its own before it stopped.
    CHECK(result.history.size() >= quenched + 1 + static_cast<std::size_t>(config.patience));
    for (std::size_t k = quenched; k < result.history.size(); ++k) {
        CHECK(result.history[k].temperature == 0.0);
    }
    check_consistent(x, result);
}

TEST_CASE("trimming keeps the anchor on the cluster where the plain mean follows far outliers", "[anneal]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    std::normal_distribution<float> noise;
    const std::size_t d = 6;
    Matrix x(1000, d);
    for (std::size_t i = 0; i < x.rows; ++i) {
        const bool outlier = i % 20 == 0;  // 5 % of the points, 1000 units out on one axis
        for (std::size_t k = 0; k < d; ++k) {
            x.row(i)[k] = (outlier && k == 0 ? 1000.0f : 0.0f) + noise(rng);
        }
    }
    AnnealConfig config;
    config.anchors = 1;
    config.seed = run_seed;
    config.maintenance_every = 0;
    const auto offset = [&](double trim) {
        config.trim = trim;
        config.trim_final = trim;
        const FitResult result = run(x, config);
        double squared = 0.0;
        for (std::size_t k = 0; k < d; ++k) {
            squared += result.anchors.row(0)[k] * result.anchors.row(0)[k];
        }
        return std::sqrt(squared);
    };
    CHECK(offset(0.1) < 0.5);
    CHECK(offset(0.0) > 40.0);
}

TEST_CASE("every run is validated against the CPU's recomputation of its energy", "[anneal][validation]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const Matrix x = random_points(800, 5, rng, 6);
    AnnealConfig config;
    config.anchors = 6;
    config.seed = run_seed;
    config.max_iters = 10;
    config.tolerance = 0.0;  // no stop before max_iters
    config.min_gain = 0.0;
    config.maintenance_every = 0;

    SECTION("a sound backend passes, at the end and every K iterations") {
        config.validate_every = 3;
        const FitResult result = run(x, config);
        CHECK(result.validation.checks == 10 / 3 + 1);
        CHECK(result.validation.relative_difference <= config.validation_tolerance);
        CHECK(result.validation.recomputed_energy == result.energy);
    }
    SECTION("anchors that differ from the ones the energy came from fail the run") {
        PerturbedAnchors faulty(make_cpu_backend(2));
        CHECK_THROWS_WITH(fit(x, config, faulty),
                          Catch::Contains("validation failed at the end of the run") && Catch::Contains("perturbed"));
        config.validate_every = 2;
        CHECK_THROWS_WITH(fit(x, config, faulty), Catch::Contains("validation failed at iteration 1"));
    }
}

TEST_CASE("fit rejects m = 0 and m > n with a message naming the option", "[anneal]") {
    std::mt19937_64 rng(seed());
    const Matrix x = random_points(10, 2, rng, 2);
    AnnealConfig config;
    config.anchors = 0;
    CHECK_THROWS_WITH(run(x, config), Catch::Contains("-m") && Catch::Contains("at least 1"));
    config.anchors = 11;
    CHECK_THROWS_WITH(run(x, config), Catch::Contains("only 10 vectors"));
}
