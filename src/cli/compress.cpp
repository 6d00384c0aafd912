// vlattice compress INPUT -o OUT.vlat: load, anneal, write the .vlat (and the run report).
#include "commands.hpp"
#include "options.hpp"
#include "progress.hpp"

#include "vlattice/anneal.hpp"
#include "vlattice/atomic_file.hpp"
#include "vlattice/codec.hpp"
#include "vlattice/device.hpp"
#include "vlattice/format.hpp"
#include "vlattice/pipeline.hpp"
#include "vlattice/report.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <unistd.h>

namespace vlattice::cli {

namespace {

const CommandHelp kHelp{
    "compress",
    "INPUT -o OUT.vlat [options]",
    "INPUT",
    "Learns M anchors for the vectors in INPUT with an annealed, outlier-robust\n"
    "k-means and stores each vector as the id of its anchor.\n"
    "INPUT: .fvecs .bvecs .ivecs .fbin .u8bin, .npy (float32, float16, uint8),\n"
    ".h5/.hdf5 (the dataset named by --dataset).",
};

struct CompressArgs {
    AnnealConfig config;
    long long anchors = 0;
    std::string input;
    std::string output;
    std::string metric;
    std::string device;
    int gpu = 0;
    std::string dataset;
    std::string anchor_storage;
    std::string report;
    bool quiet = false;
};

// Every default comes from a default-constructed AnnealConfig, ReadOptions or VlatFile, so the help
// cannot drift from what a run actually uses.
void add_options(po::options_description& options, CompressArgs& a) {
    const AnnealConfig c;
    const long long anchors = static_cast<long long>(c.anchors);
    const std::string dataset = ReadOptions{}.dataset;
    const std::string storage = anchor_storage_name(VlatFile{}.anchor_storage);
    const std::string metric = metric_name(VlatFile{}.metric);
    options.add_options()
        ("output,o", po::value(&a.output)->required()->value_name("FILE"),
         "the .vlat file to write; an existing file is replaced only when the run succeeds")
        ("anchors,m", po::value(&a.anchors)->default_value(anchors, show(anchors))->value_name("M"),
         "anchors to learn, 1 <= M <= number of vectors; anchors left empty are dropped, so the file may hold fewer")
        ("iters", po::value(&a.config.max_iters)->default_value(c.max_iters, show(c.max_iters))->value_name("N"),
         "maximum iterations; the run stops earlier when converged")
        ("t0", po::value(&a.config.t0)->default_value(c.t0, show(c.t0))->value_name("T"),
         "initial temperature, >= 0; hot iterations trim more outliers and move anchors part of the way, "
         "0 runs cold (plain Lloyd steps with --trim-final) from the start")
        ("cooling", po::value(&a.config.cooling)->default_value(c.cooling, show(c.cooling))->value_name("C"),
         "T <- T * (1 - C) after every iteration, C in [0, 1)")
        ("trim", po::value(&a.config.trim)->default_value(c.trim, show(c.trim))->value_name("F"),
         "share of each anchor's farthest members left out of its mean at T = T0, in [0, 1)")
        ("trim-final", po::value(&a.config.trim_final)->default_value(c.trim_final, show(c.trim_final))->value_name("F"),
         "share left out at T = 0, in [0, 1); 0 ends at a k-means fixed point, = --trim gives trimmed k-means")
        ("maintenance-every", po::value(&a.config.maintenance_every)
                                  ->default_value(c.maintenance_every, show(c.maintenance_every))->value_name("P"),
         "merge close anchors, split crowded ones and re-seed empty ones every P iterations while hot; 0 turns it off")
        ("seed", po::value(&a.config.seed)->default_value(c.seed, show(c.seed))->value_name("S"),
         "seeds every random choice; the same input and seed give a byte-identical file on any machine")
        ("metric", po::value(&a.metric)->default_value(metric)->value_name("NAME"),
         "l2, or angular (every vector scaled to unit length on load)")
        ("validate-every", po::value(&a.config.validate_every)
                               ->default_value(c.validate_every, show(c.validate_every))->value_name("K"),
         "also check the energy against the CPU's double-precision recomputation after every K-th assign "
         "(every run is checked once at its end); 0: only at the end")
        ("threads", po::value(&a.config.threads)->default_value(c.threads, show(c.threads))->value_name("N"),
         "CPU threads (OpenMP and BLAS); 0 uses every core; the result does not depend on it")
        ("device", po::value(&a.device)->default_value("auto")->value_name("KIND"),
         "auto (the GPU when one is usable, else the CPU), cpu, or cuda (fail when no GPU is usable)")
        ("gpu", po::value(&a.gpu)->default_value(0)->value_name("N"), "index of the CUDA device to use")
        ("dataset", po::value(&a.dataset)->default_value(dataset)->value_name("NAME"),
         "dataset to read from an HDF5 INPUT")
        ("anchor-storage", po::value(&a.anchor_storage)->default_value(storage)->value_name("TYPE"),
         "f32, or f16 (half the anchor bytes; anchors rounded to half precision)")
        ("report", po::value(&a.report)->value_name("FILE"),
         "also write a JSON run report: config, every iteration, seconds per phase")
        ("quiet", po::bool_switch(&a.quiet), "print nothing but errors");
}

template <class T>
void require(bool ok, const char* option, const char* rule, T got) {
    if (!ok) {
        throw UsageError(std::string(option) + " must be " + rule + ", got " + show(got));
    }
}

// The range checks of vlattice::validate, phrased with option names and run before the input is
// read; whether M fits the data is left to validate once n is known.
void check_values(const CompressArgs& a) {
    const AnnealConfig& c = a.config;
    require(a.anchors >= 1, "-m/--anchors", "at least 1", a.anchors);
    require(c.max_iters >= 1, "--iters", "at least 1", c.max_iters);
    require(c.t0 >= 0.0 && std::isfinite(c.t0), "--t0", "a finite number >= 0", c.t0);
    require(c.cooling >= 0.0 && c.cooling < 1.0, "--cooling", "in [0, 1)", c.cooling);
    require(c.trim >= 0.0 && c.trim < 1.0, "--trim", "in [0, 1)", c.trim);
    require(c.trim_final >= 0.0 && c.trim_final < 1.0, "--trim-final", "in [0, 1)", c.trim_final);
    require(c.maintenance_every >= 0, "--maintenance-every", ">= 0", c.maintenance_every);
    require(c.validate_every >= 0, "--validate-every", ">= 0", c.validate_every);
    require(c.threads >= 0, "--threads", ">= 0", c.threads);
    require(a.gpu >= 0, "--gpu", ">= 0", a.gpu);
}

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void print_summary(const RunInput& input, const AnnealConfig& config, const FitResult& result,
                   const ReportContext& context, const std::string& output) {
    const double total = context.load_seconds + result.seconds.total + context.write_seconds;
    const auto bytes = static_cast<double>(std::filesystem::file_size(output));
    const double raw = 4.0 * static_cast<double>(input.n) * static_cast<double>(input.d);
    std::printf("vectors     %zu x %zu (%s)\n", input.n, input.d, metric_name(input.metric));
    std::printf("anchors     %zu requested, %zu final\n", config.anchors, result.anchors.rows);
    std::printf("iterations  %d (%s)\n", result.iterations, result.stop_reason.c_str());
    std::printf("energy      %.9g\n", result.energy);
    std::printf("seconds     %.3f (load %.3f, fit %.3f, write %.3f; %s)\n", total, context.load_seconds,
                result.seconds.total, context.write_seconds, context.backend.c_str());
    std::printf("output      %s: %.0f bytes, %.3f bytes per vector, %.4f of float32 (%.1fx smaller)\n",
                output.c_str(), bytes, bytes / static_cast<double>(input.n), bytes / raw, raw / bytes);
}

int compress(int argc, char** argv) {
    CompressArgs args;
    po::options_description options("options");
    add_options(options, args);
    po::variables_map values;
    if (!parse_command_line(argc, argv, kHelp, options, values)) {
        return 0;
    }
    args.input = values["input"].as<std::string>();
    check_values(args);
    AnnealConfig& config = args.config;
    config.anchors = static_cast<std::size_t>(args.anchors);
    const Metric metric = parse_option_value([&] { return parse_metric(args.metric); });
    const AnchorStorage storage = parse_option_value([&] { return parse_anchor_storage(args.anchor_storage); });
    const DeviceKind device = parse_option_value([&] { return parse_device(args.device); });

    // An output that cannot be created fails now rather than after the run; the probe's temporary
    // file is removed again at the end of this statement.
    AtomicFile{args.output};
    std::optional<AtomicFile> report_file;
    if (!args.report.empty()) {
        report_file.emplace(args.report);
    }

    BackendChoice choice = make_backend(device, args.gpu, config.threads);
    if (!choice.note.empty() && !args.quiet) {
        print_notice(kHelp.name, "note", choice.note);
    }

    ReportContext context;
    context.backend = choice.backend->name();
    context.threads = config.threads;
    auto start = std::chrono::steady_clock::now();
    ReadOptions read_options;
    read_options.dataset = args.dataset;
    const LoadedPoints loaded = load_points(args.input, read_options, metric);
    context.load_seconds = seconds_since(start);
    context.input = {args.input, loaded.points.rows, loaded.points.cols, metric};
    if (loaded.zero_rows > 0 && !args.quiet) {
        print_notice(kHelp.name, "warning",
                     std::to_string(loaded.zero_rows) + " vectors are all zero; with --metric angular they have no "
                     "direction and stay zero");
    }
    validate(config, loaded.points.rows);

    ProgressBar progress(!args.quiet && ::isatty(STDERR_FILENO), config.max_iters, loaded.points.rows);
    const FitResult result =
        fit(loaded.points, config, *choice.backend, [&](const IterationRecord& record) { progress.update(record); });
    progress.finish();

    start = std::chrono::steady_clock::now();
    write_vlat(args.output, make_vlat(result, context.input, storage, run_metadata(config, result, context.input)));
    context.write_seconds = seconds_since(start);

    if (report_file) {
        report_file->stream() << run_report(config, result, context).dump(2) << '\n';
        report_file->commit();
    }
    if (!args.quiet) {
        print_summary(context.input, config, result, context, args.output);
    }
    return 0;
}

}  // namespace

int run_compress(int argc, char** argv) {
    return run_guarded(kHelp.name, [&] { return compress(argc, argv); });
}

}  // namespace vlattice::cli
