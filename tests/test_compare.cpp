// vlattice compare: the CPU and GPU runs side by side. Without a usable GPU it must say why and fail;
// with one, the two runs must agree.
#include "support.hpp"

#include "vlattice/io.hpp"
#include "vlattice/pipeline.hpp"

#ifdef VLATTICE_HAVE_CUDA
#include "../cuda/runtime/gpu_probe.hpp"
#endif

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace vlattice;
using namespace vlattice::test;
using Catch::Contains;

namespace {

bool gpu_usable() {
#ifdef VLATTICE_HAVE_CUDA
    return cuda::probe_gpu(0).usable;
#else
    return false;
#endif
}

// A Gaussian mixture of 12 clusters: anchors that both runs find the same way.
std::string write_sample(const ScratchDir& dir, std::uint64_t run_seed) {
    std::mt19937_64 rng(run_seed);
    const std::string path = dir.path("points.fvecs");
    write_vectors(path, random_points(4001, 19, rng, 12));
    return path;
}

}  // namespace

TEST_CASE("equal_assignment_share counts the points both runs give the same id", "[pipeline][compare]") {
    CHECK(equal_assignment_share({0, 1, 2, 3}, {0, 1, 3, 3}) == Approx(0.75));
    CHECK(equal_assignment_share({4, 4}, {4, 4}) == 1.0);
    CHECK(equal_assignment_share({0, 1}, {1, 0}) == 0.0);
    CHECK(equal_assignment_share({}, {}) == 1.0);
    CHECK_THROWS_WITH(equal_assignment_share({0, 1}, {0}), Contains("2") && Contains("1 points"));
}

TEST_CASE("compare without a usable GPU fails and says why", "[cli][compare]") {
    if (gpu_usable()) {
        WARN("skipped: a GPU is usable here");
        return;
    }
    ScratchDir dir;
    const CommandResult result = run_cli("compare " + quote(write_sample(dir, seed())) + " -m 8 --iters 3");
    INFO(result.output);
    CHECK(result.exit_code == 1);
    CHECK_THAT(result.output, Contains("vlattice compare: error: "));
    // "no CUDA support" is the reason a build without CUDA gives.
    CHECK_THAT(result.output, Contains("no usable GPU") || Contains("no CUDA support"));
    // compress's advice to pass --device names an option compare does not have.
    CHECK_THAT(result.output, !Contains("--device"));
}

TEST_CASE("compare --help lists the options with their defaults and bad command lines exit 2", "[cli][compare]") {
    const CommandResult help = run_cli("compare --help");
    INFO(help.output);
    CHECK(help.exit_code == 0);
    CHECK_THAT(help.output, Contains("usage: vlattice compare INPUT"));
    for (const char* option : {"--anchors ] M (=256)", "--iters N (=50)", "--t0 T (=1)", "--cooling C (=0.3)",
                               "--trim F (=0.1)", "--trim-final F (=0)", "--maintenance-every P (=5)", "--seed S (=1)",
                               "--metric NAME (=auto)", "--validate-every K (=0)", "--threads N (=0)", "--gpu N (=0)",
                               "--dataset NAME (=train)", "--json", "--quiet", "--help"}) {
        CHECK_THAT(help.output, Contains(option));
    }
    CHECK(run_cli("help compare").output == help.output);
    CHECK_THAT(run_cli("--help").output, Contains("compare"));

    // Usage errors come before the GPU is asked for, so they read the same on any machine.
    for (const char* arguments : {"compare x.fvecs --bogus", "compare x.fvecs -m 0", "compare x.fvecs --metric hamming",
                                  "compare"}) {
        const CommandResult bad = run_cli(arguments);
        INFO(arguments << '\n' << bad.output);
        CHECK(bad.exit_code == 2);
        CHECK_THAT(bad.output, Contains("vlattice compare: error: ") && Contains("vlattice compare --help"));
    }
}

TEST_CASE("compare on a GPU: both runs land on the same energy and assignments", "[gpu][compare]") {
    if (!gpu_usable()) {
        WARN("skipped: no usable GPU");
        return;
    }
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    ScratchDir dir;
    const CommandResult result =
        run_cli("compare " + quote(write_sample(dir, run_seed)) + " -m 24 --iters 20 --quiet --json");
    INFO(result.output);
    REQUIRE(result.exit_code == 0);
    const nlohmann::json c = nlohmann::json::parse(result.output);
    CHECK(c["n"] == 4001);
    CHECK(c["d"] == 19);
    CHECK(c["energy_relative_difference"].get<double>() < 1e-3);
    CHECK(c["equal_assignment_share"].get<double>() > 0.99);
    CHECK(c["speedup"].is_number());
    for (const char* side : {"cpu", "gpu"}) {
        INFO(side);
        const nlohmann::json& seconds = c[side]["seconds"];
        for (const char* phase : {"init", "assign", "reduce", "update", "maintenance", "energy", "validation", "total"}) {
            CHECK(seconds.contains(phase));
        }
        CHECK(seconds["total"].get<double>() > 0.0);
        CHECK(c[side]["energy"].get<double>() > 0.0);
        CHECK(c[side]["iterations"].get<int>() >= 1);
        CHECK(c[side]["anchors"].get<std::size_t>() >= 1);
    }

    const CommandResult table = run_cli("compare " + quote(dir.path("points.fvecs")) + " -m 24 --iters 20 --quiet");
    INFO(table.output);
    CHECK(table.exit_code == 0);
    for (const char* row : {"load", "init", "assign", "reduce", "update", "maintenance", "energy", "validation", "total (fit)",
                            "iterations", "anchors", "energy relative difference", "equal assignments"}) {
        CHECK_THAT(table.output, Contains(row));
    }
}
