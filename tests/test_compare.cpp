// vlattice compare: the CPU and GPU runs side by side. Without a usable GPU it must say why and fail;
// with one, the two runs must agree.
#include "support.hpp"

#include "vlattice/io.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace vlattice;
using namespace vlattice::test;

namespace {

std::string write_sample(const ScratchDir& dir, std::uint64_t run_seed) {
    std::mt19937_64 rng(run_seed);
    const std::string path = dir.path("points.fvecs");
    write_vectors(path, random_points(4001, 19, rng, 12));
    return path;
}

// The note `compress --device auto` prints when it falls back to the CPU, or empty when a GPU is used.
bool gpu_usable(const std::string& input, const ScratchDir& dir) {
    const CommandResult probe = run_cli("compress '" + input + "' -o '" + dir.path("probe.vlat") + "' -m 2 --iters 1");
    return probe.output.find("no usable GPU") == std::string::npos;
}

}  // namespace

TEST_CASE("compare without a usable GPU fails and says why", "[cli][compare]") {
    ScratchDir dir;
    const std::string input = write_sample(dir, seed());
    if (gpu_usable(input, dir)) {
        WARN("skipped: a GPU is usable here");
        return;
    }
    const CommandResult result = run_cli("compare '" + input + "' -m 8 --iters 3");
    INFO(result.output);
    CHECK(result.exit_code == 1);
    CHECK_THAT(result.output, Catch::Contains("vlattice compare: error") && Catch::Contains("no usable GPU"));
}

TEST_CASE("compare --help lists the annealing options with their defaults", "[cli][compare]") {
    const CommandResult result = run_cli("compare --help");
    CHECK(result.exit_code == 0);
    for (const char* option : {"--anchors ] M (=256)", "--iters N (=50)", "--t0 T (=1)", "--cooling C (=0.3)",
                               "--trim F (=0.1)", "--trim-final F (=0)", "--maintenance-every P (=5)", "--seed S (=1)",
                               "--metric NAME (=l2)", "--validate-every K (=0)", "--threads N (=0)", "--gpu N (=0)",
                               "--json"}) {
        INFO(option);
        CHECK_THAT(result.output, Catch::Contains(option));
    }
    const CommandResult bad = run_cli("compare x.fvecs --bogus");
    CHECK(bad.exit_code == 2);
    CHECK_THAT(bad.output, Catch::Contains("--bogus"));
}

TEST_CASE("compare on a GPU: both runs land on the same energy and assignments", "[gpu][compare]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    ScratchDir dir;
    const std::string input = write_sample(dir, run_seed);
    if (!gpu_usable(input, dir)) {
        WARN("skipped: no usable GPU");
        return;
    }
    const CommandResult result = run_cli("compare '" + input + "' -m 24 --iters 20 --json");
    INFO(result.output);
    REQUIRE(result.exit_code == 0);
    const nlohmann::json c = nlohmann::json::parse(result.output);
    CHECK(c["energy_relative_difference"].get<double>() < 1e-3);
    CHECK(c["equal_assignment_share"].get<double>() > 0.99);
    for (const char* side : {"cpu", "gpu"}) {
        CHECK(c[side]["seconds"]["total"].get<double>() > 0.0);
        CHECK(c[side]["energy"].get<double>() > 0.0);
    }
}
