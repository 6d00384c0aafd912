// When an annealing run stops, and why: decided after every assign from the energy and the number of
// points that changed anchor (AnnealConfig's tolerance, min_gain and patience).
#pragma once

#include "vlattice/backend.hpp"
#include "vlattice/config.hpp"

#include <cstddef>
#include <string>

namespace vlattice {

enum class StopAction {
    go_on,
    quench,  // still hot, but hot iterations stopped paying: go cold (T = 0) now
    stop,    // cold, and further iterations stopped paying: reason() says how
};

class StoppingRule {
public:
    StoppingRule(const AnnealConfig& config, std::size_t n);

    // Called after every assign; `cold` is whether this iteration runs at T = 0.
    StopAction observe(const AssignStats& assigned, bool cold);

    // Why the run stopped: set once observe returned stop, else the maximum of iterations, with
    // the last gain so that a user can tell whether more iterations would pay.
    std::string reason() const;

private:
    double tolerance_, min_gain_;
    int patience_, max_iters_;
    std::size_t n_;
    int observed_ = 0;
    double previous_energy_ = 0.0;
    double gain_ = 0.0;  // relative energy gain of the last iteration
    int stalled_ = 0;    // consecutive iterations with energy and assignments (nearly) unchanged
    int slow_ = 0;       // consecutive iterations that gained less than min_gain
    std::string stopped_;
};

}  // namespace vlattice
