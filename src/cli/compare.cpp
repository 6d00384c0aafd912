// vlattice compare INPUT: the same run on the CPU and on the GPU, side by side.
#include "anneal_options.hpp"
#include "commands.hpp"
#include "input_files.hpp"
#include "options.hpp"
#include "progress.hpp"

#include "vlattice/anneal.hpp"
#include "vlattice/cpu_backend.hpp"
#include "vlattice/device.hpp"
#include "vlattice/pipeline.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <unistd.h>

namespace vlattice::cli {

namespace {

const CommandHelp kHelp{
    "compare",
    "INPUT [options]",
    "INPUT",
    "Loads the vectors in INPUT once and runs the annealing on them twice, on\n"
    "the CPU and then on the GPU, with the same seed and settings. Prints the\n"
    "seconds of each phase on both and the speed-up (CPU seconds / GPU\n"
    "seconds), the iterations, final anchors and energy of each run, the\n"
    "relative difference |E_gpu - E_cpu| / E_cpu, and the share of points both\n"
    "runs give the same anchor id. Writes no file.\n"
    "Fails (exit 1) before the CPU run when no GPU is usable.\n"
    "INPUT: any file compress reads.",
};

struct CompareArgs {
    AnnealArgs anneal;
    bool json = false;
    bool quiet = false;
};

struct Phase {
    const char* key;    // in the JSON
    const char* label;  // in the table
    double PhaseSeconds::*seconds;
};

// In the order a fit runs them; the total is the whole fit, the shared load excluded.
constexpr Phase kPhases[] = {
    {"init", "init", &PhaseSeconds::init},
    {"assign", "assign", &PhaseSeconds::assign},
    {"reduce", "reduce", &PhaseSeconds::reduce},
    {"update", "update", &PhaseSeconds::update},
    {"maintenance", "maintenance", &PhaseSeconds::maintenance},
    {"energy", "energy", &PhaseSeconds::energy},
    {"validation", "validation", &PhaseSeconds::validation},
    {"total", "total (fit)", &PhaseSeconds::total},
};

struct Comparison {
    std::string input;
    std::size_t n = 0;
    std::size_t d = 0;
    Metric metric = Metric::l2;
    AnnealConfig config;
    double load_seconds = 0.0;
    FitResult cpu;
    FitResult gpu;
};

void add_options(po::options_description& options, CompareArgs& a) {
    add_anneal_options(options, a.anneal);
    options.add_options()
        ("json", po::bool_switch(&a.json), "print one JSON object instead of the table")
        ("quiet,q", po::bool_switch(&a.quiet), "no progress display and no warnings; the table or JSON still prints");
}

// Asked before the CPU run, so that a machine without a GPU fails at once, with the reason.
std::unique_ptr<Backend> make_gpu_backend(int gpu, int threads, GpuKernels kernels, std::size_t gpu_memory) {
    const GpuStatus status = gpu_status(gpu);
    if (!status.usable) {
        throw Error("no usable GPU: " + status.description + "; compare needs one");
    }
    return make_backend(DeviceKind::cuda, gpu, threads, kernels, gpu_memory).backend;
}

FitResult run(const PointView& points, const AnnealConfig& config, Backend& backend, bool show_progress) {
    ProgressBar progress(show_progress, config.max_iters, points.rows);
    FitResult result = fit(points, config, backend, [&](const IterationRecord& record) { progress.update(record); });
    progress.finish();
    return result;
}

// Both zero counts as agreement; a zero CPU energy with a non-zero GPU one as a huge difference.
double energy_relative_difference(const Comparison& c) {
    return std::abs(c.gpu.energy - c.cpu.energy) / std::max(c.cpu.energy, std::numeric_limits<double>::min());
}

double equal_share(const Comparison& c) {
    return equal_assignment_share(c.cpu.assignments, c.gpu.assignments);
}

// A phase that took no time on the GPU (maintenance turned off, say) has no speed-up: JSON null.
nlohmann::json speedup(double cpu_seconds, double gpu_seconds) {
    return gpu_seconds > 0.0 ? nlohmann::json(cpu_seconds / gpu_seconds) : nlohmann::json(nullptr);
}

nlohmann::json side_json(const FitResult& r) {
    nlohmann::json seconds;
    for (const Phase& phase : kPhases) {
        seconds[phase.key] = r.seconds.*phase.seconds;
    }
    return {{"seconds", seconds},
            {"energy", r.energy},
            {"iterations", r.iterations},
            {"anchors", r.anchors.rows},
            {"stop_reason", r.stop_reason}};
}

nlohmann::json comparison_json(const Comparison& c) {
    return {
        {"input", c.input},
        {"n", c.n},
        {"d", c.d},
        {"m", c.config.anchors},
        {"metric", metric_name(c.metric)},
        {"config", config_json(c.config)},
        {"load_seconds", c.load_seconds},
        {"cpu", side_json(c.cpu)},
        {"gpu", side_json(c.gpu)},
        {"speedup", speedup(c.cpu.seconds.total, c.gpu.seconds.total)},
        {"energy_relative_difference", energy_relative_difference(c)},
        {"equal_assignment_share", equal_share(c)},
    };
}

std::string format(const char* spec, double value) {
    char text[32];
    std::snprintf(text, sizeof text, spec, value);
    return text;
}

std::string speedup_text(double cpu_seconds, double gpu_seconds) {
    return gpu_seconds > 0.0 ? format("%.2f", cpu_seconds / gpu_seconds) : "-";
}

void print_table(const Comparison& c) {
    const char* const row = "%-12s %16s %16s %9s\n";
    std::printf("%s: %zu x %zu (%s), M = %zu\n", c.input.c_str(), c.n, c.d, metric_name(c.metric), c.config.anchors);
    std::printf(row, "", "cpu s", "gpu s", "speed-up");
    std::printf(row, "load", format("%.4f", c.load_seconds).c_str(), "(shared)", "-");
    for (const Phase& phase : kPhases) {
        const double cpu = c.cpu.seconds.*phase.seconds;
        const double gpu = c.gpu.seconds.*phase.seconds;
        std::printf(row, phase.label, format("%.4f", cpu).c_str(), format("%.4f", gpu).c_str(),
                    speedup_text(cpu, gpu).c_str());
    }
    std::printf("\n");
    std::printf(row, "", "cpu", "gpu", "");
    std::printf(row, "iterations", std::to_string(c.cpu.iterations).c_str(), std::to_string(c.gpu.iterations).c_str(),
                "");
    std::printf(row, "anchors", std::to_string(c.cpu.anchors.rows).c_str(), std::to_string(c.gpu.anchors.rows).c_str(),
                "");
    std::printf(row, "energy", format("%.9g", c.cpu.energy).c_str(), format("%.9g", c.gpu.energy).c_str(), "");
    std::printf("\nenergy relative difference  %.3g\n", energy_relative_difference(c));
    std::printf("equal assignments           %.4f %% of %zu points\n", 100.0 * equal_share(c), c.n);
    if (c.cpu.anchors.rows != c.gpu.anchors.rows) {
        std::printf("  the final anchor counts differ, so an id need not name the same anchor in both runs;\n"
                    "  the share above compares the raw ids\n");
    }
}

int compare(int argc, char** argv) {
    CompareArgs args;
    po::variables_map values;
    if (!parse_command_line(argc, argv, kHelp, [&](po::options_description& o) { add_options(o, args); }, values)) {
        return 0;
    }
    Comparison c;
    c.input = values["input"].as<std::string>();
    check_anneal_args(args.anneal);
    check_inputs({{"INPUT", c.input}});
    c.config = args.anneal.config;
    c.metric = metric_of(args.anneal, c.input);

    // The GPU is asked for first, so that a machine without one fails before the long CPU run.
    const std::unique_ptr<Backend> gpu = make_gpu_backend(args.anneal.gpu, c.config.threads, args.anneal.kernels,
                                                               args.anneal.gpu_memory_bytes);
    const BackendChoice cpu_choice = make_backend(DeviceKind::cpu, args.anneal.gpu, c.config.threads);
    if (!cpu_choice.note.empty() && !args.quiet) {
        print_notice(kHelp.name, "note", cpu_choice.note);
    }
    Backend* const cpu = cpu_choice.backend.get();

    const auto start = std::chrono::steady_clock::now();
    const LoadedSet loaded = load_input(kHelp.name, c.input, args.anneal, c.metric, args.quiet);
    const PointView points = loaded.points.view();
    c.load_seconds = seconds_since(start);
    c.n = points.rows;
    c.d = points.cols;

    const bool show_progress = !args.quiet && ::isatty(STDERR_FILENO);
    c.cpu = run(points, c.config, *cpu, show_progress);
    c.gpu = run(points, c.config, *gpu, show_progress);

    if (args.json) {
        std::printf("%s\n", comparison_json(c).dump(2).c_str());
    } else {
        print_table(c);
    }
    return 0;
}

}  // namespace

int run_compare(int argc, char** argv) {
    return run_guarded(kHelp.name, [&] { return compare(argc, argv); });
}

}  // namespace vlattice::cli
