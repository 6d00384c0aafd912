// vlattice compress INPUT -o OUT.vlat: load, anneal, write the .vlat (and the run report).
#include "activity.hpp"
#include "anneal_options.hpp"
#include "coding_options.hpp"
#include "commands.hpp"
#include "device_note.hpp"
#include "input_files.hpp"
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
    "k-means and stores each vector as the id of its anchor, plus, with --bits or a\n"
    "--target-bytes/--target-ratio budget, a scalar code of its residual from it.\n"
    "INPUT: .fvecs .bvecs .ivecs .fbin .u8bin .i8bin, .npy (float32, float64,\n"
    "float16, uint8, int8), .h5/.hdf5 (the dataset named by --dataset), or - for\n"
    "standard input: read to its end into memory before the run, in the format\n"
    "--input-format names. float64 is narrowed to float32. Values must be finite\n"
    "and (after --metric angular scales each vector to unit length) within\n"
    "+-sqrt(FLT_MAX / (8 d)), 2.3e18 at d = 8, so that squared distances fit\n"
    "float32; the largest |value| must be 0 or at least 2^-46 (1.42e-14). The error\n"
    "names the row and column of a value that is not.",
};

struct CompressArgs {
    AnnealArgs anneal;
    CodingArgs coding;
    std::string input;
    std::string output;
    std::string device;
    std::string anchor_storage;
    std::string report;
    bool quiet = false;
};

// Every default comes from a default-constructed AnnealConfig, ReadOptions or VlatFile, so the help
// cannot drift from what a run actually uses.
void add_options(po::options_description& options, CompressArgs& a) {
    const std::string storage = anchor_storage_name(VlatFile{}.anchor_storage);
    options.add_options()
        ("output,o", po::value(&a.output)->required()->value_name("FILE"),
         "the .vlat file to write; it and the --report file replace existing files only once the whole run has "
         "succeeded and both are written");
    add_anneal_options(options, a.anneal);
    add_input_format_option(options, a.anneal);
    add_coding_options(options, a.coding);
    options.add_options()
        ("device", po::value(&a.device)->default_value("auto")->value_name("KIND"),
         "auto (the GPU when one is usable, else the CPU), cpu, or cuda (fail when no GPU is usable)")
        ("anchor-storage", po::value(&a.anchor_storage)->default_value(storage)->value_name("TYPE"),
         "f32, or f16 (half the anchor bytes; anchors rounded to half precision)")
        ("report", po::value(&a.report)->value_name("FILE"),
         "also write a JSON run report: config, every iteration, seconds per phase")
        ("quiet,q", po::bool_switch(&a.quiet), "print nothing but errors");
}

void print_summary(const RunInput& input, const AnnealConfig& config, const FitResult& result,
                   const ReportContext& context, const std::string& output, const VlatFile& file) {
    const double total = context.load_seconds + result.seconds.total + context.write_seconds;
    const auto bytes = static_cast<double>(std::filesystem::file_size(output));
    const double raw = 4.0 * static_cast<double>(input.n) * static_cast<double>(input.d);
    std::printf("vectors     %zu x %zu (%s)\n", input.n, input.d, metric_name(input.metric));
    std::printf("anchors     %zu requested, %zu final\n", config.anchors, result.anchors.rows);
    std::printf("iterations  %d (%s)\n", result.iterations, result.stop_reason.c_str());
    std::printf("energy      %.9g\n", result.energy);
    std::printf("seconds     %.3f (load %.3f, fit %.3f, write %.3f; %s)\n", total, context.load_seconds,
                result.seconds.total, context.write_seconds, context.backend.c_str());
    std::printf("codes       %s\n", describe_coding(file.anchors.rows, file.residuals.layout.bits).c_str());
    const double code_bytes = code_bytes_per_vector(file);
    std::printf("code bytes  %.3f per vector, %.4f of float32\n", code_bytes, code_bytes / (4.0 * static_cast<double>(input.d)));
    std::printf("output      %s: %.0f bytes in all, %.3f bytes per vector, %.4f of float32 (%.1fx smaller)\n",
                output.c_str(), bytes, bytes / static_cast<double>(input.n), bytes / raw, raw / bytes);
}

int compress(int argc, char** argv) {
    CompressArgs args;
    po::variables_map values;
    if (!parse_command_line(argc, argv, kHelp, [&](po::options_description& o) { add_options(o, args); }, values)) {
        return 0;
    }
    args.input = values["input"].as<std::string>();
    check_anneal_args(args.anneal);
    check_coding_args(values, args.coding);
    const std::vector<NamedPath> outputs{{"-o", args.output}, {"--report", args.report}};
    check_outputs(outputs, {{"INPUT", args.input == "-" ? "" : args.input}});
    clear_stale_temporaries(kHelp.name, outputs, args.quiet);
    AnnealConfig& config = args.anneal.config;
    const AnchorStorage storage = parse_option_value([&] { return parse_anchor_storage(args.anchor_storage); });
    const DeviceKind device = parse_option_value([&] { return parse_device(args.device); });
    args.input = input_file(args.input, args.anneal);
    const Metric metric = metric_of(args.anneal, args.input);

    // An output that cannot be created fails now rather than after the run; the probe's temporary
    // file is removed again at the end of this statement.
    AtomicFile{args.output};
    std::optional<AtomicFile> report_file;
    if (!args.report.empty()) {
        report_file.emplace(args.report);
    }
    check_inputs({{"INPUT", args.input}});

    BackendChoice choice = make_backend(device, args.anneal.gpu, config.threads);

    ReportContext context;
    context.backend = choice.backend->name();
    auto start = std::chrono::steady_clock::now();
    const LoadedPoints loaded = load_input(kHelp.name, args.input, args.anneal, metric, args.quiet);
    context.load_seconds = seconds_since(start);
    print_device_note(kHelp.name, choice.note, args.quiet);
    context.input = {args.input, loaded.points.rows, loaded.points.cols, metric};
    const CodingRequest coding = coding_request(values, args.coding, loaded.points.cols);
    const std::size_t budget_anchors = anchors_for(coding, loaded.points.rows, config.anchors);
    if (budget_anchors != config.anchors && !args.quiet) {
        print_notice(kHelp.name, "note",
                     "the budget of " + std::to_string(*coding.target_bytes) + " bytes per vector holds the ids of " +
                         std::to_string(budget_anchors) + " anchors, not " + std::to_string(config.anchors));
    }
    config.anchors = budget_anchors;
    if (const std::string note = budget_note(coding, loaded.points.rows, budget_anchors, loaded.points.cols);
        !note.empty() && !args.quiet) {
        print_notice(kHelp.name, "note", note);
    }

    ProgressBar progress(!args.quiet && ::isatty(STDERR_FILENO), config.max_iters, loaded.points.rows);
    const FitResult result = during("fitting " + std::to_string(config.anchors) + " anchors", [&] {
        return fit(loaded.points, config, *choice.backend,
                   [&](const IterationRecord& record) { progress.update(record); });
    });
    progress.finish();

    start = std::chrono::steady_clock::now();
    // The .vlat and the report are renamed into place together, once both are written.
    OutputGroup written;
    const Activity writing("coding the vectors and writing -o " + args.output);
    const std::vector<std::uint8_t> widths = residual_widths(coding, loaded.points, result);
    nlohmann::json metadata = run_metadata(config, result, context.input);
    metadata["residuals"] = coding_json(coding, widths);
    VlatFile file = make_vlat(result, context.input, storage, metadata);
    if (!widths.empty()) {
        add_residual_codes(file, loaded.points, widths);
    }
    write_vlat(args.output, file);
    context.write_seconds = seconds_since(start);

    if (report_file) {
        report_file->stream() << run_report(config, result, context).dump(2) << '\n';
        report_file->commit();
    }
    written.commit();
    if (!args.quiet) {
        print_summary(context.input, config, result, context, args.output, file);
    }
    return 0;
}

}  // namespace

int run_compress(int argc, char** argv) {
    return run_guarded(kHelp.name, [&] { return compress(argc, argv); });
}

}  // namespace vlattice::cli
