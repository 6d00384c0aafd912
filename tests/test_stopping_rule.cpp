// When a run stops and what it says: the stopping rule on energy sequences written out by hand.
#include "fit/stopping_rule.hpp"

#include <catch2/catch.hpp>

#include <vector>

using namespace vlattice;

namespace {

constexpr std::size_t kN = 100000;

// The actions the rule takes on the energies in turn, with `changed` points moving each time.
std::vector<StopAction> observe_all(StoppingRule& rule, const std::vector<double>& energies, bool cold,
                                    std::size_t changed = 1000) {
    std::vector<StopAction> actions;
    for (double energy : energies) {
        AssignStats assigned;
        assigned.energy = energy;
        assigned.changed = changed;
        actions.push_back(rule.observe(assigned, cold));
    }
    return actions;
}

AnnealConfig defaults() {
    AnnealConfig config;
    REQUIRE(config.min_gain == 2e-3);
    REQUIRE(config.patience == 3);
    REQUIRE(config.tolerance == 1e-4);
    return config;
}

const StopAction go_on = StopAction::go_on;
const StopAction quench = StopAction::quench;
const StopAction stop = StopAction::stop;

}  // namespace

TEST_CASE("a cold run stops after patience iterations that each gain less than min_gain and says so", "[stopping]") {
    StoppingRule rule(defaults(), kN);
    // Gains 0.1, then 0.0011, 0.0019 and 0.001: under 0.002 three times.
    const std::vector<double> energies{1.0, 0.9, 0.9 * (1 - 0.0011), 0.9 * (1 - 0.0011) * (1 - 0.0019),
                                       0.9 * (1 - 0.0011) * (1 - 0.0019) * (1 - 0.001)};
    CHECK(observe_all(rule, energies, true) == std::vector<StopAction>{go_on, go_on, go_on, go_on, stop});
    CHECK(rule.reason() ==
          "converged: the energy gained less than 0.002 of itself per iteration for 3 iterations (the last 0.001)");
}

TEST_CASE("an iteration that pays starts the count again", "[stopping]") {
    StoppingRule rule(defaults(), kN);
    // Gains 0.001, 0.001, 0.003 (pays), then 0.001 three times.
    const std::vector<double> energies{1.0, 0.999, 0.998001, 0.995007, 0.994012, 0.993018, 0.992025};
    CHECK(observe_all(rule, energies, true) ==
          std::vector<StopAction>{go_on, go_on, go_on, go_on, go_on, go_on, stop});
}

TEST_CASE("while hot gains that stop paying quench the run and the cold run must stop on its own", "[stopping]") {
    StoppingRule rule(defaults(), kN);
    const std::vector<double> hot{1.0, 0.9999, 0.9998, 0.9997};
    CHECK(observe_all(rule, hot, false) == std::vector<StopAction>{go_on, go_on, go_on, quench});
    CHECK_THAT(rule.reason(), Catch::StartsWith("reached the maximum"));
    const std::vector<double> cold{0.9996, 0.9995, 0.9994};
    CHECK(observe_all(rule, cold, true) == std::vector<StopAction>{go_on, go_on, stop});
}

TEST_CASE("min_gain 0 turns the gain rule off: only a fixed point or the maximum stops the run", "[stopping]") {
    AnnealConfig config = defaults();
    config.min_gain = 0.0;
    StoppingRule rule(config, kN);
    // Tiny gains, and even a rise, do not stop it while points still change anchor.
    const std::vector<double> creeping{1.0, 0.99999, 0.99998, 1.00001, 0.99997, 0.99996};
    CHECK(observe_all(rule, creeping, true) == std::vector<StopAction>(creeping.size(), go_on));
    CHECK(rule.reason() == "reached the maximum of 50 iterations; the last gained 1e-05 of the energy");
    // Fewer than tolerance * n = 10 changes, and the energy still within 1e-4: a fixed point.
    CHECK(observe_all(rule, {0.99996, 0.99996, 0.99996}, true, 9) == std::vector<StopAction>{go_on, go_on, stop});
    CHECK(rule.reason() == "converged: energy and assignments changed by less than 0.0001 (relative) for 3 iterations");
}

TEST_CASE("a fixed point stops the run even when min_gain is off and the energy is zero", "[stopping]") {
    AnnealConfig config = defaults();
    config.min_gain = 0.0;
    StoppingRule rule(config, kN);
    CHECK(observe_all(rule, {0.0, 0.0, 0.0, 0.0}, true, 0) == std::vector<StopAction>{go_on, go_on, go_on, stop});
    CHECK_THAT(rule.reason(), Catch::StartsWith("converged: energy and assignments changed"));
}

TEST_CASE("a run cut short by the maximum says how much its last iteration gained", "[stopping]") {
    StoppingRule rule(defaults(), kN);
    CHECK(rule.reason() == "reached the maximum of 50 iterations");
    observe_all(rule, {1.0}, false);
    CHECK(rule.reason() == "reached the maximum of 50 iterations");
    observe_all(rule, {0.75}, false);
    CHECK(rule.reason() == "reached the maximum of 50 iterations; the last gained 0.25 of the energy");
}
