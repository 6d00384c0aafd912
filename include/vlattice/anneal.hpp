// The annealed, outlier-robust k-means: fit() runs k-means++ init, then assign -> robust reduce ->
// temperature-scaled update per iteration, with maintenance every P iterations, on any Backend.
#pragma once

#include "vlattice/backend.hpp"
#include "vlattice/config.hpp"
#include "vlattice/point_set.hpp"
#include "vlattice/types.hpp"

#include <functional>
#include <string>
#include <vector>

namespace vlattice {

struct IterationRecord {
    int iteration = 0;
    double temperature = 0.0;
    double trim = 0.0;  // trim fraction used by this iteration's reduce
    double eta = 0.0;   // update step used by this iteration
    double energy = 0.0;  // after this iteration's assign
    std::size_t changed = 0;  // assignments changed by this iteration's assign
    int merged = 0;  // maintenance this iteration
    int split = 0;
    int reseeded = 0;
    // Wall time from the start of this iteration's assign to the end of its maintenance: the first
    // iteration carries one-time costs (the GPU backend's graph captures), which a mean over the
    // loop spreads over every iteration.
    double seconds = 0.0;
};

struct PhaseSeconds {
    // Each phase is the wall time of its backend calls. The GPU backend queues update without waiting
    // for it (nothing is read back), so the update's few microseconds of device time count in the
    // phase that waits next: the next assign, or maintenance.
    // validation: bringing the final anchors and assignments back and the CPU's recomputation of
    // the energy from them (checks during the run count with their iterations' phases).
    double init = 0, assign = 0, reduce = 0, update = 0, maintenance = 0, energy = 0, validation = 0, total = 0;
    // Parts of maintenance: finding each anchor's nearest anchor, and splitting anchors (gathering
    // their members and the 2-means, Backend::split_members); the rest is moving the anchors.
    double maintenance_nearest = 0, maintenance_members = 0;
    // Part of init: handing the points to the backend (on the GPU, their upload); the rest is
    // k-means++.
    double init_upload = 0;
};

// The CPU's double-precision recomputation of a backend's energy.
struct Validation {
    int checks = 0;                    // during the run and at the end
    double recomputed_energy = 0.0;    // of the final anchors and assignments
    double relative_difference = 0.0;  // the largest over all checks
};

struct FitResult {
    Matrix anchors;  // final anchors; empty anchors are dropped, so rows may be < config.anchors
    std::vector<std::uint32_t> assignments;  // argmin over the final anchors
    double energy = 0.0;  // of the final anchors and assignments, in double
    int iterations = 0;
    bool converged = false;
    std::string stop_reason;
    std::vector<IterationRecord> history;
    PhaseSeconds seconds;
    std::string points_placement;  // Backend::points_placement() after the upload
    int merged = 0, split = 0, reseeded = 0, dropped_empty = 0;
    Validation validation;
};

using IterationCallback = std::function<void(const IterationRecord&)>;

// Validates the config against the points, and the points against check_accepted_range, then runs
// to convergence or config.max_iters. Under a 16-bit config.storage the fit works on a rounded copy
// of the points (round_to_format) unless the format holds them as they are, and its energy is that
// of the copy. Points of any stored type fit as their float32 values would. Throws Error when the
// backend's energy disagrees with the CPU's recomputation (see AnnealConfig).
FitResult fit(const PointView& points, const AnnealConfig& config, Backend& backend,
              const IterationCallback& on_iteration = {});

// The schedule, exposed for tests and reports.
double trim_at(const AnnealConfig& config, double temperature);
double eta_at(double temperature);

// E = (1/n) sum ||x_i - c_a(i)||^2 in double on the CPU, whatever backend produced the inputs.
double cpu_energy(const PointView& points, const Matrix& anchors, const std::vector<std::uint32_t>& assignments);
// The same over the whole set, of which `points` and `assignments` are this rank's share.
double cpu_energy(const RowShare& share, const PointView& points, const Matrix& anchors,
                  const std::vector<std::uint32_t>& assignments);

}  // namespace vlattice
