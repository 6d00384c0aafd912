// vlattice compare INPUT: the same run on the CPU and on the GPU, side by side.
#include "anneal_options.hpp"
#include "commands.hpp"
#include "options.hpp"

#include "vlattice/anneal.hpp"
#include "vlattice/cpu_backend.hpp"
#include "vlattice/device.hpp"
#include "vlattice/pipeline.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>

namespace vlattice::cli {

namespace {

const CommandHelp kHelp{
    "compare",
    "INPUT [options]",
    "INPUT",
    "Runs the annealing on the CPU and on the GPU with the same data, seed\n"
    "and settings, and prints the seconds of each phase, the speed-up, both\n"
    "energies, their relative difference and the share of points both assign\n"
    "to the same anchor. Needs a usable GPU.",
};

struct CompareArgs {
    AnnealArgs anneal;
    bool json = false;
};

constexpr const char* kPhases[] = {"init", "assign", "reduce", "update", "maintenance", "energy", "total"};

double phase(const PhaseSeconds& s, const std::string& name) {
    if (name == "init") return s.init;
    if (name == "assign") return s.assign;
    if (name == "reduce") return s.reduce;
    if (name == "update") return s.update;
    if (name == "maintenance") return s.maintenance;
    if (name == "energy") return s.energy;
    return s.total;
}

// Anchor ids only correspond while both runs kept the same anchors, which the caller reports.
double equal_share(const std::vector<std::uint32_t>& a, const std::vector<std::uint32_t>& b) {
    std::size_t equal = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        equal += a[i] == b[i] ? 1 : 0;
    }
    return a.empty() ? 1.0 : static_cast<double>(equal) / static_cast<double>(a.size());
}

nlohmann::json side_json(const FitResult& r) {
    nlohmann::json seconds;
    for (const char* name : kPhases) {
        seconds[name] = phase(r.seconds, name);
    }
    return {{"seconds", seconds},
            {"energy", r.energy},
            {"iterations", r.iterations},
            {"anchors", r.anchors.rows},
            {"stop_reason", r.stop_reason}};
}

void print_table(const nlohmann::json& c) {
    const nlohmann::json& cpu = c["cpu"];
    const nlohmann::json& gpu = c["gpu"];
    std::printf("%s: %zu x %zu, m = %zu\n", c["input"].get<std::string>().c_str(), c["n"].get<std::size_t>(),
                c["d"].get<std::size_t>(), c["m"].get<std::size_t>());
    std::printf("%-12s %10s %10s %9s\n", "phase", "cpu s", "gpu s", "speed-up");
    std::printf("%-12s %10.4f %10.4f %9s\n", "load", c["load_seconds"].get<double>(),
                c["load_seconds"].get<double>(), "(shared)");
    for (const char* name : kPhases) {
        const double a = cpu["seconds"][name].get<double>();
        const double b = gpu["seconds"][name].get<double>();
        std::printf("%-12s %10.4f %10.4f %9.2f\n", name, a, b, b > 0.0 ? a / b : 0.0);
    }
    std::printf("iterations   cpu %d, gpu %d\n", cpu["iterations"].get<int>(), gpu["iterations"].get<int>());
    std::printf("anchors      cpu %zu, gpu %zu%s\n", cpu["anchors"].get<std::size_t>(), gpu["anchors"].get<std::size_t>(),
                cpu["anchors"] == gpu["anchors"] ? "" : " (ids need not correspond)");
    std::printf("energy       cpu %.9g, gpu %.9g, relative difference %.3g\n", cpu["energy"].get<double>(),
                gpu["energy"].get<double>(), c["energy_relative_difference"].get<double>());
    std::printf("equal assignments %.4f %%\n", 100.0 * c["equal_assignment_share"].get<double>());
}

int compare(int argc, char** argv) {
    CompareArgs args;
    po::options_description options("options");
    add_anneal_options(options, args.anneal);
    options.add_options()("json", po::bool_switch(&args.json), "print one JSON object instead of the table");
    po::variables_map values;
    if (!parse_command_line(argc, argv, kHelp, options, values)) {
        return 0;
    }
    const std::string input = values["input"].as<std::string>();
    check_anneal_args(args.anneal);
    const AnnealConfig& config = args.anneal.config;
    const Metric metric = metric_of(args.anneal);

    // The GPU is asked for first, so that a machine without one fails before the long CPU run.
    BackendChoice gpu = make_backend(DeviceKind::cuda, args.anneal.gpu, config.threads);
    std::unique_ptr<Backend> cpu = make_cpu_backend(config.threads);

    const auto start = std::chrono::steady_clock::now();
    ReadOptions read_options;
    read_options.dataset = args.anneal.dataset;
    const LoadedPoints loaded = load_points(input, read_options, metric);
    const double load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    const FitResult on_cpu = fit(loaded.points, config, *cpu);
    const FitResult on_gpu = fit(loaded.points, config, *gpu.backend);

    nlohmann::json result = {
        {"input", input},
        {"n", loaded.points.rows},
        {"d", loaded.points.cols},
        {"m", config.anchors},
        {"metric", metric_name(metric)},
        {"config", config_json(config)},
        {"load_seconds", load_seconds},
        {"cpu", side_json(on_cpu)},
        {"gpu", side_json(on_gpu)},
        {"speedup", on_gpu.seconds.total > 0.0 ? on_cpu.seconds.total / on_gpu.seconds.total : 0.0},
        {"energy_relative_difference", std::abs(on_gpu.energy - on_cpu.energy) / std::max(on_cpu.energy, 1e-300)},
        {"equal_assignment_share", equal_share(on_cpu.assignments, on_gpu.assignments)},
    };
    if (args.json) {
        std::printf("%s\n", result.dump(2).c_str());
    } else {
        print_table(result);
    }
    return 0;
}

}  // namespace

int run_compare(int argc, char** argv) {
    return run_guarded(kHelp.name, [&] { return compare(argc, argv); });
}

}  // namespace vlattice::cli
