// The annealing loop. Per iteration: assign -> convergence check -> robust reduce at trim(T) ->
// update with step eta(T) -> maintenance every P iterations -> cool. Everything heavy happens in
// the Backend; this file only schedules, and never includes a CUDA header.
#include "vlattice/anneal.hpp"

#include "fit/maintenance.hpp"
#include "fit/stopping_rule.hpp"
#include "numeric.hpp"
#include "parallel/row_share.hpp"
#include "parallel/shared_sum.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

namespace vlattice {

namespace {

class Stopwatch {
public:
    // Adds the seconds since construction to `total` when it goes out of scope.
    explicit Stopwatch(double& total) : total_(total), start_(std::chrono::steady_clock::now()) {}
    ~Stopwatch() {
        total_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    }

private:
    double& total_;
    std::chrono::steady_clock::time_point start_;
};

// Enough members for a 2-means to find the two halves of an anchor, few enough to split it cheaply:
// the annealing refines both halves afterwards.
constexpr std::size_t kSplitSampleMembers = 256;

std::size_t init_sample_size(const AnnealConfig& config, std::size_t n) {
    return config.init_sample > 0 ? std::min(config.init_sample, n) : std::min(n, 8 * config.anchors);
}

// Anchors that ended with no members carry no information; they are removed and the points
// re-assigned so that ids stay dense. Returns how many of the m were removed. Only the kept rows
// travel: a full copy of the anchors into fresh pages cost ~2 ms at 1,024 x 784 on the GPU machine.
int drop_empty_anchors(Backend& backend, const RowShare& share, std::size_t m) {
    std::vector<std::uint64_t> used(m, 0);
    for (std::uint32_t a : backend.download_assignments()) {
        used[a] = 1;
    }
    share.ranks->max(used.data(), m);
    std::vector<std::uint32_t> live;
    for (std::size_t j = 0; j < m; ++j) {
        if (used[j] != 0) {
            live.push_back(static_cast<std::uint32_t>(j));
        }
    }
    if (live.size() == m) {
        return 0;
    }
    backend.upload_anchors(backend.download_anchor_rows(live));
    backend.assign();
    return static_cast<int>(m - live.size());
}

// The largest |coordinate| over every rank's rows (each >= 0, whose bits order like the floats).
float largest_of_all(const RowShare& share, float mine) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &mine, sizeof mine);
    std::uint64_t most = bits;
    share.ranks->max(&most, 1);
    bits = static_cast<std::uint32_t>(most);
    std::memcpy(&mine, &bits, sizeof mine);
    return mine;
}

// Compares the backend's energy with the CPU's recomputation from what the backend hands back; the
// two computations share nothing but the inputs, so agreement checks the backend end to end.
void check_energy(const RowShare& share, const PointView& points, const Matrix& anchors,
                  const std::vector<std::uint32_t>& assignments,
                  double backend_energy, const char* backend, const AnnealConfig& config, Validation& validation,
                  const std::string& when) {
    const double recomputed = cpu_energy(share, points, anchors, assignments);
    ++validation.checks;
    validation.recomputed_energy = recomputed;
    // A NaN compares false with everything, so that relative_difference would let it pass.
    if (!std::isfinite(recomputed) || !std::isfinite(backend_energy)) {
        char message[512];
        std::snprintf(message, sizeof message,
                      "validation failed %s: the energy is not finite (the %s backend's %.12g, the CPU's "
                      "recomputation %.12g)",
                      when.c_str(), backend, backend_energy, recomputed);
        throw Error(message);
    }
    const double difference = relative_difference(recomputed, backend_energy);
    validation.relative_difference = std::max(validation.relative_difference, difference);
    if (!(difference <= config.validation_tolerance)) {
        char message[512];
        std::snprintf(message, sizeof message,
                      "validation failed %s: the %s backend's energy %.12g differs from the CPU's recomputation "
                      "%.12g by %.3g (relative), more than %.3g",
                      when.c_str(), backend, backend_energy, recomputed, difference, config.validation_tolerance);
        throw Error(message);
    }
}

}  // namespace

double cpu_energy(const PointView& points, const Matrix& anchors, const std::vector<std::uint32_t>& assignments) {
    return cpu_energy(whole_set(points.rows), points, anchors, assignments);
}

double cpu_energy(const RowShare& share, const PointView& points, const Matrix& anchors,
                  const std::vector<std::uint32_t>& assignments) {
    return shared_sum(
               share, points.rows,
               [&](std::size_t i) {
                   thread_local std::vector<float> scratch;
                   scratch.resize(points.cols);
                   return squared_distance(points.row(i, scratch.data()), anchors.row(assignments[i]), points.cols);
               },
               points.cols) /
           static_cast<double>(share.total_rows);
}

double trim_at(const AnnealConfig& config, double temperature) {
    if (config.t0 <= 0.0) {
        return config.trim_final;
    }
    const double hot = std::min(1.0, temperature / config.t0);
    return config.trim_final + (config.trim - config.trim_final) * hot;
}

// Hot anchors move only part of the way to their robust mean, so one noisy early reduce cannot throw
// them far; at T = 0 the step is the full Lloyd step.
double eta_at(double temperature) {
    return 1.0 / (1.0 + temperature);
}

FitResult fit(const PointView& input, const AnnealConfig& config, Backend& backend,
              const IterationCallback& on_iteration) {
    // Ranks that share the rows decide everything below alike, from what they exchange.
    RowShare share = backend.row_share();
    if (share.total_rows == 0) {
        share = whole_set(input.rows);
    }
    const std::size_t n = share.total_rows;
    validate(config, n);
    const float largest = largest_of_all(share, check_accepted_range(input, "the points"));
    const auto start = std::chrono::steady_clock::now();
    FitResult result;
    // Under a 16-bit storage the fit, the validation included, sees the points as stored: a rounded
    // float32 copy, unless the format holds them already (a float16 or 8-bit input under f16 would
    // double the process's memory, or more, for a copy equal to it).
    Matrix rounded;
    const RunSetup setup{point_format(largest, config.storage), config.assign_precision};
    const bool as_given = holds_exactly(input, setup.format);
    if (!as_given) {
        if (input.mapped()) {
            throw Error(std::string("the points stay in their file (--memory), and --storage ") +
                        storage_name(config.storage) + " would round them into a float32 copy in memory: fit them "
                        "with --storage f32, or store them as float16 or 8-bit values");
        }
        rounded = input.widened();
        round_to_format(rounded, setup.format);
    }
    const PointView points = as_given ? input : PointView(rounded);
    {
        Stopwatch watch(result.seconds.init);
        {
            Stopwatch upload(result.seconds.init_upload);
            backend.upload_points(points, setup);
        }
        result.points_placement = backend.points_placement();
        backend.seed_anchors(points, config.anchors, init_sample_size(config, n), config.seed);
    }

    double temperature = config.t0;
    StoppingRule stopping(config, n);
    bool anchors_moved_since_assign = true;
    for (int iteration = 0; iteration < config.max_iters; ++iteration) {
        const auto began = std::chrono::steady_clock::now();
        IterationRecord record;
        record.iteration = iteration;
        AssignStats assigned;
        {
            Stopwatch watch(result.seconds.assign);
            assigned = backend.assign();
        }
        anchors_moved_since_assign = false;
        if (!std::isfinite(assigned.energy)) {
            throw Error(std::string("the ") + backend.name() + " backend's energy after the assign of iteration " +
                        std::to_string(iteration) + " is " + std::to_string(assigned.energy) +
                        ", not a finite number: the run cannot go on");
        }
        record.energy = assigned.energy;
        record.changed = assigned.changed;
        result.iterations = iteration + 1;
        if (config.validate_every > 0 && (iteration + 1) % config.validate_every == 0) {
            check_energy(share, points, backend.download_anchors(), backend.download_assignments(), assigned.energy,
                         backend.name(), config, result.validation, "at iteration " + std::to_string(iteration));
        }

        switch (stopping.observe(assigned, temperature == 0.0)) {
        case StopAction::go_on:
            break;
        case StopAction::quench:
            temperature = 0.0;
            break;
        case StopAction::stop:
            result.converged = true;
            break;
        }
        record.temperature = temperature;
        record.trim = trim_at(config, temperature);
        record.eta = eta_at(temperature);
        if (!result.converged) {
            {
                Stopwatch watch(result.seconds.reduce);
                backend.robust_reduce(record.trim);
            }
            {
                Stopwatch watch(result.seconds.update);
                backend.update(record.eta);
            }
            anchors_moved_since_assign = true;

            const int every = config.maintenance_every;
            if (every > 0 && temperature > 0.0 && (iteration + 1) % every == 0 && iteration + 1 + every <= config.max_iters) {
                Stopwatch watch(result.seconds.maintenance);
                const MaintenanceResult changes = maintain(
                    backend.download_stats(), points.cols, config,
                    [&](const std::vector<std::uint32_t>& rows) { return backend.download_anchor_rows(rows); },
                    [&](const std::vector<std::uint32_t>& listed) {
                        Stopwatch part(result.seconds.maintenance_members);
                        return backend.split_members(listed, kSplitSampleMembers);
                    },
                    [&](const std::vector<std::uint32_t>& live) {
                        Stopwatch part(result.seconds.maintenance_nearest);
                        return backend.nearest_anchors(live);
                    });
                backend.upload_anchor_rows(changes.changed, changes.changed_rows);
                record.merged = changes.merged;
                record.split = changes.split;
                record.reseeded = changes.reseeded;
                result.merged += changes.merged;
                result.split += changes.split;
                result.reseeded += changes.reseeded;
            }
        }

        record.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
        result.history.push_back(record);
        if (on_iteration) {
            on_iteration(record);
        }
        if (result.converged) {
            break;
        }
        temperature *= 1.0 - config.cooling;
        if (temperature < config.t_floor * config.t0) {
            temperature = 0.0;
        }
    }
    result.stop_reason = stopping.reason();

    {
        Stopwatch watch(result.seconds.assign);
        if (anchors_moved_since_assign) {
            backend.assign();
        }
        result.dropped_empty = drop_empty_anchors(backend, share, config.anchors);
    }
    {
        Stopwatch watch(result.seconds.energy);
        result.energy = backend.energy();
    }
    {
        Stopwatch watch(result.seconds.validation);
        result.anchors = backend.download_anchors();
        result.assignments = backend.download_assignments();
        check_energy(share, points, result.anchors, result.assignments, result.energy, backend.name(), config,
                     result.validation, "at the end of the run");
    }
    result.seconds.total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return result;
}

}  // namespace vlattice
