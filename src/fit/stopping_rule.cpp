#include "fit/stopping_rule.hpp"

#include "numeric.hpp"

#include <cstdio>

namespace vlattice {

namespace {

std::string format(const char* pattern, double a, double b = 0.0) {
    char text[160];
    std::snprintf(text, sizeof text, pattern, a, b);
    return text;
}

}  // namespace

StoppingRule::StoppingRule(const AnnealConfig& config, std::size_t n)
    : tolerance_(config.tolerance),
      min_gain_(config.min_gain),
      patience_(config.patience),
      max_iters_(config.max_iters),
      n_(n) {}

StopAction StoppingRule::observe(const AssignStats& assigned, bool cold) {
    if (observed_++ > 0) {
        gain_ = previous_energy_ > 0.0 ? (previous_energy_ - assigned.energy) / previous_energy_ : 0.0;
        const bool unchanged = relative_difference(previous_energy_, assigned.energy) < tolerance_ &&
                               static_cast<double>(assigned.changed) < tolerance_ * static_cast<double>(n_);
        stalled_ = unchanged ? stalled_ + 1 : 0;
        // min_gain = 0 turns the rule off, rather than counting every iteration whose energy rose.
        slow_ = min_gain_ > 0.0 && gain_ < min_gain_ ? slow_ + 1 : 0;
    }
    previous_energy_ = assigned.energy;
    if (stalled_ < patience_ && slow_ < patience_) {
        return StopAction::go_on;
    }
    if (!cold) {
        // The cold run must earn its own stop: a hot iteration's gain mixes the cooling in.
        stalled_ = 0;
        slow_ = 0;
        return StopAction::quench;
    }
    const std::string run = " for " + std::to_string(patience_) + (patience_ == 1 ? " iteration" : " iterations");
    stopped_ = stalled_ >= patience_
                   ? format("converged: energy and assignments changed by less than %.3g (relative)", tolerance_) + run
                   : format("converged: the energy gained less than %.3g of itself per iteration", min_gain_) + run +
                         format(" (the last %.3g)", gain_);
    return StopAction::stop;
}

std::string StoppingRule::reason() const {
    if (!stopped_.empty()) {
        return stopped_;
    }
    return "reached the maximum of " + std::to_string(max_iters_) + " iterations" +
           (observed_ > 1 ? format("; the last gained %.3g of the energy", gain_) : "");
}

}  // namespace vlattice
