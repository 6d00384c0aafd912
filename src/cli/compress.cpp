// vlattice compress INPUT -o OUT.vlat: load, anneal, train the residual code, code the vectors, write
// the .vlat (and the run report). vlattice train is the same run without the coding: it writes the
// model.
#include "activity.hpp"
#include "anneal_options.hpp"
#include "coding_options.hpp"
#include "commands.hpp"
#include "compress_args.hpp"
#include "device_note.hpp"
#include "anchor_source.hpp"
#include "input_files.hpp"
#include "number_options.hpp"
#include "options.hpp"
#include "process_ranks.hpp"
#include "progress.hpp"

#include "vlattice/anneal.hpp"
#include "vlattice/atomic_file.hpp"
#include "vlattice/codec.hpp"
#include "vlattice/device.hpp"
#include "vlattice/format.hpp"
#include "vlattice/model.hpp"
#include "vlattice/pipeline.hpp"
#include "vlattice/report.hpp"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>

#include <unistd.h>

namespace vlattice::cli {

namespace {

const char* const kInputHelp =
    "INPUT: .fvecs .bvecs .ivecs .fbin .u8bin .i8bin, .npy (float32, float64,\n"
    "float16, uint8, int8), .h5/.hdf5 (the dataset named by --dataset), or - for\n"
    "standard input: read to its end into memory before the run, in the format\n"
    "--input-format names. float64 is narrowed to float32. Values must be finite\n"
    "and (after --metric angular scales each vector to unit length) within\n"
    "+-sqrt(FLT_MAX / (8 d)), 2.3e18 at d = 8, so that squared distances fit\n"
    "float32; the largest |value| must be 0 or at least 2^-46 (1.42e-14). The error\n"
    "names the row and column of a value that is not.";

const CommandHelp kTrainHelp{
    "train",
    "INPUT -o MODEL.vlat [options]",
    "INPUT",
    std::string("Learns what compress learns (the anchors, and with --bits, --codec pq\n"
                "--subspaces or a budget the residual code) and writes it as a model: a .vlat\n"
                "without vectors, which `vlattice encode --model MODEL.vlat` codes any vectors\n"
                "with, exactly as compress would have coded them.\n") + kInputHelp,
};

const CommandHelp kCompressHelp{
    "compress",
    "INPUT -o OUT.vlat [options]",
    "INPUT",
    "Learns M anchors for the vectors in INPUT with an annealed, outlier-robust\n"
    "k-means and stores each vector as the id of its anchor, plus, with --bits,\n"
    "--codec pq --subspaces, --codec rq --stages or a budget (--target-bytes,\n"
    "--target-ratio, --target-file-bytes, --target-file-ratio), a code of its\n"
    "residual from it: a per-anchor scalar code, a rotated\n"
    "product code or a residual code of additive stages, the one with the lowest\n"
    "error on held-out vectors (--codec). The same as `train` then\n"
    "`encode` with the model; --anchors-from reuses another file's anchors.\n"
    "Under mpirun or srun (`mpirun -np R vlattice compress ...`), each process\n"
    "reads its own rows and the processes fit them together, each on its local\n"
    "rank's GPU where every rank has one (else all on the CPU), with the result of\n"
    "one process, bit for bit; rank 0 writes the outputs. There a residual code\n"
    "trains on --train-sample rows, which every rank then holds; a whole-file\n"
    "budget and --anchors-from are not taken yet.\n" + std::string(kInputHelp),
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
        ("anchors-from", po::value(&a.anchors_from)->value_name("FILE.vlat"),
         "take the anchors of this .vlat or model (as it stores them) instead of fitting new ones; "
         "-m and the fit's options are then unused")
        ("train-sample", whole_number(&a.train_sample, 0LL)->default_value(0)->value_name("N"),
         "fit the anchors and train the residual code on N rows drawn with --seed, then assign and code every "
         "row with them, a tile at a time; from .npy, big-ann and TEXMEX files and contiguous HDF5 datasets only "
         "the N rows are read for the fit and then the file a tile at a time, so the set is never held whole; "
         "0 (or N >= the rows): train on every row")
        ("report", po::value(&a.report)->value_name("FILE"),
         "also write a JSON run report: config, every iteration, seconds per phase")
        ("quiet,q", po::bool_switch(&a.quiet), "print nothing but errors");
}

// ", anchors and codes trained on N rows" when the run trained on a sample of its rows, else "".
std::string trained_on(const RunInput& input) {
    return input.train_rows > 0 && input.train_rows < input.n
               ? ", anchors and codes trained on " + std::to_string(input.train_rows) + " rows"
               : std::string();
}

// Codes every row of `rows` with `model`, a tile at a time from the file, each tile checked and
// prepared as load_points would (its zero rows under angular warned about once at the end, as
// compress warns when it reads a whole file); the file's scale is checked once every tile is seen.
VlatFile encode_streamed(const VlatFile& model, const VectorRows& rows, const std::string& path, Metric metric,
                         Backend& backend, StageSeconds* seconds, const RowProgress& progress,
                         std::size_t tile_rows, const std::string& command, bool quiet) {
    std::size_t zero_rows = 0;
    float largest = 0.0f;
    std::size_t largest_at = 0;
    const RowSource source{rows.rows(), rows.cols(), [&](std::size_t first, std::size_t count, Matrix& tile) {
                               rows.read_range(first, count, tile);
                               const PreparedRows prepared = prepare_rows(tile, path, metric, first);
                               zero_rows += prepared.zero_rows;
                               if (prepared.largest > largest) {
                                   largest = prepared.largest;
                                   largest_at = first;
                               }
                           }};
    VlatFile file = encode_with_model(model, source, backend, model.metadata_json, seconds, progress, tile_rows);
    if (largest > 0.0f && largest < accepted_range(rows.cols()).smallest_scale) {
        Matrix tile;
        rows.read_range(largest_at, std::min(tile_rows == 0 ? pass_tile_rows(rows.cols()) : tile_rows,
                                             rows.rows() - largest_at),
                        tile);
        prepare_rows(tile, path, metric, largest_at);
        check_accepted_range(tile, path, largest_at);  // throws, naming where the largest is
    }
    warn_zero_rows(command, zero_rows, quiet);
    return file;
}

// `requested`: -m (or the count the budget's ids allow); `tried`: the counts a whole-file budget fitted.
void print_summary(const RunInput& input, std::size_t requested, const std::vector<std::size_t>& tried,
                   const FitResult& result, const ReportContext& context, const std::string& output,
                   const VlatFile& file) {
    const double fit = result.seconds.total + context.other_fits_seconds;
    const double total = context.load_seconds + fit + context.code_seconds + context.write_seconds;
    const auto bytes = static_cast<double>(std::filesystem::file_size(output));
    const double raw = 4.0 * static_cast<double>(input.n) * static_cast<double>(input.d);
    std::printf("vectors     %zu x %zu (%s)%s\n", input.n, input.d, metric_name(input.metric),
                trained_on(input).c_str());
    const std::string counts = tried.size() > 1 ? " (of " + describe_counts(tried) + " tried)" : "";
    std::printf("anchors     %zu requested, %zu final%s\n", requested, result.anchors.rows, counts.c_str());
    std::printf("iterations  %d (%s)\n", result.iterations, result.stop_reason.c_str());
    std::printf("energy      %.9g\n", result.energy);
    std::printf("seconds     %.3f (load %.3f, fit %.3f, code %.3f, write %.3f; %s)\n", total, context.load_seconds,
                fit, context.code_seconds, context.write_seconds, context.backend.c_str());
    if (!result.points_placement.empty()) {
        std::printf("points      %s\n", result.points_placement.c_str());
    }
    std::printf("codes       %s\n", describe_coding(file).c_str());
    const double code_bytes = code_bytes_per_vector(file);
    std::printf("code bytes  %.3f per vector, %.4f of float32\n", code_bytes, code_bytes / (4.0 * static_cast<double>(input.d)));
    // A small set under a large codebook can take more than its float32 copy; the summary says so.
    char size[64];
    std::snprintf(size, sizeof size, bytes <= raw ? "%.1fx smaller" : "%.2fx larger than float32",
                  bytes <= raw ? raw / bytes : bytes / raw);
    std::printf("output      %s: %.0f bytes in all, %.3f bytes per vector, %.4f of float32 (%s)\n", output.c_str(),
                bytes, bytes / static_cast<double>(input.n), bytes / raw, size);
}

void print_model_summary(const RunInput& input, const FitResult& result, const ReportContext& context,
                         const std::string& output, const VlatFile& model) {
    const bool sampled = input.train_rows > 0 && input.train_rows < input.n;
    std::printf("vectors     %zu x %zu (%s), %s trained on\n", input.n, input.d, metric_name(input.metric),
                sampled ? (std::to_string(input.train_rows) + " of them").c_str() : "all");
    std::printf("iterations  %d (%s)\n", result.iterations, result.stop_reason.c_str());
    const double fit = result.seconds.total + context.other_fits_seconds;
    std::printf("seconds     %.3f (load %.3f, fit %.3f, code %.3f, write %.3f; %s)\n",
                context.load_seconds + fit + context.code_seconds + context.write_seconds, context.load_seconds, fit,
                context.code_seconds, context.write_seconds, context.backend.c_str());
    if (!result.points_placement.empty()) {
        std::printf("points      %s\n", result.points_placement.c_str());
    }
    std::printf("model       %s: %s, %.0f bytes\n", output.c_str(), describe_coding(model).c_str(),
                static_cast<double>(std::filesystem::file_size(output)));
}

// compress, or with `model_only` train.
int compress(int argc, char** argv, bool model_only) {
    const CommandHelp& help = model_only ? kTrainHelp : kCompressHelp;
    CompressArgs args;
    po::variables_map values;
    if (!parse_command_line(argc, argv, help, [&](po::options_description& o) { add_options(o, args); }, values)) {
        return 0;
    }
    args.input = values["input"].as<std::string>();
    check_anneal_args(args.anneal);
    check_coding_args(values, args.coding);
    if (Collective* ranks = process_ranks()) {
        if (model_only) {
            throw UsageError("under mpirun or srun, train is not run over several processes yet: run it alone");
        }
        return compress_on_ranks(help, args, values, *ranks);
    }
    const std::vector<NamedPath> outputs{{"-o", args.output}, {"--report", args.report}};
    check_outputs(outputs, {{"INPUT", args.input == "-" ? "" : args.input}});
    clear_stale_temporaries(help.name, outputs, args.quiet);
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

    BackendChoice choice = make_backend(device, args.anneal.gpu, config.threads, args.anneal.kernels,
                                        args.anneal.gpu_memory_bytes);

    ReportContext context;
    context.backend = choice.backend->name();
    auto start = std::chrono::steady_clock::now();
    // A sample trains the anchors and the code; every row is then coded with them. From a file read
    // by rows, only the sample is read for the fit, and the coding reads the rest a tile at a time.
    const auto sample = static_cast<std::size_t>(args.train_sample);
    const std::unique_ptr<VectorRows> by_rows =
        sample > 0 ? open_vector_rows(args.input, ReadOptions{args.anneal.dataset, args.anneal.input_format})
                   : nullptr;
    const bool streamed = by_rows && sample < by_rows->rows();
    LoadedSet loaded;
    Matrix training;
    if (streamed) {
        const std::vector<std::uint32_t> rows = training_rows(by_rows->rows(), sample, config.seed);
        training = during("reading the --train-sample rows of INPUT " + args.input, [&] {
            Matrix read = by_rows->selection(rows);
            prepare_selected_rows(read, args.input, metric, rows);  // its zero rows are warned of with the rest
            return read;
        });
    } else {
        loaded = load_input(help.name, args.input, args.anneal, metric, args.quiet);
    }
    context.load_seconds = seconds_since(start);
    print_device_note(help.name, choice.note, args.quiet);
    const PointView points = loaded.points.view();
    const std::size_t n = streamed ? by_rows->rows() : points.rows;
    const std::size_t d = streamed ? by_rows->cols() : points.cols;
    context.input = {args.input, n, d, metric};
    const bool sampled = sample > 0 && sample < n;
    if (sampled && !streamed) {
        training = during("drawing the --train-sample rows",
                          [&] { return points.select(training_rows(n, sample, config.seed)); });
    }
    const PointView fitted_points = sampled ? PointView(training) : points;
    context.input.train_rows = fitted_points.rows;
    if (!args.quiet && sampled) {
        print_notice(help.name, "note",
                     "the anchors and the residual code train on " + std::to_string(fitted_points.rows) + " of the " +
                         std::to_string(n) + " rows (--train-sample); every row is then assigned and coded");
    }
    CodingSpec coding = coding_spec(values, args.coding, d, config);
    if (coding.file_budget) {
        coding.file_budget->storage = storage;
    }
    const std::optional<VlatFile> source = anchor_source(args.anchors_from);
    const std::size_t wanted = source ? source->anchors.rows : config.anchors;
    const std::vector<std::size_t> counts = anchor_counts(coding, n, d, wanted);
    if (source && counts.front() != wanted) {
        throw Error("--anchors-from " + args.anchors_from + ": " +
                    (coding.file_budget ? "the whole-file budget of " + show(coding.file_budget->bytes_per_vector) +
                                              " bytes per vector does not hold the file's " + std::to_string(wanted) +
                                              " anchors with their ids and the metadata"
                                        : "the budget holds the ids of " + std::to_string(counts.front()) +
                                              " anchors, and the file has " + std::to_string(wanted)));
    }
    if (!args.quiet && !source && coding.budget_bytes && counts.front() != wanted) {
        print_notice(help.name, "note",
                     "the budget of " + show(*coding.budget_bytes) + " bytes per vector holds the ids of " +
                         std::to_string(counts.front()) + " anchors, not " + std::to_string(wanted));
    }
    if (!args.quiet && !source && coding.file_budget) {
        print_notice(help.name, "note", "the whole-file budget of " + show(coding.file_budget->bytes_per_vector) +
                                            " bytes per vector tries " + describe_counts(counts) +
                                            (counts.size() == 1 && counts[0] == 1 ? " anchor" : " anchors"));
    }
    if (const std::string note = budget_note(coding, n, counts.front(), d);
        !note.empty() && !args.quiet) {
        print_notice(help.name, "note", note);
    }

    // A budget of code bytes lowers -m to the count whose ids it holds; a whole-file budget tries
    // several counts from -m down, and the metadata keeps -m as the count requested.
    if (source || !coding.file_budget) {
        config.anchors = counts.front();
    }
    if (sampled && !source) {
        check_train_sample(fitted_points.rows, counts.front());
    }
    start = std::chrono::steady_clock::now();
    // The fits name their own step inside this one.
    const TrainedRun run = during("training the residual code", [&] {
        return fit_and_train(fitted_points, config, source ? std::vector<std::size_t>{wanted} : counts, context.input,
                             storage, coding, *choice.backend, [&](const AnnealConfig& fitted) {
                                 return fit_or_reuse(source, args.anchors_from, fitted_points, fitted,
                                                     *choice.backend, args.quiet);
                             });
    });
    const double trained_seconds = seconds_since(start);
    const FitResult& result = run.fit;
    for (std::size_t t = 0; t < run.trials.size(); ++t) {
        if (t != run.chosen) {
            context.other_fits_seconds += run.trials[t].fit_seconds;
        }
        for (const auto& [stage, seconds] : run.trials[t].coding.seconds.entries()) {
            context.code_training.add(stage, seconds);
        }
        for (const CodingCandidate& candidate : run.trials[t].coding.candidates) {
            context.code_candidates.emplace_back(run.trials[t].anchors, candidate);
        }
    }
    start = std::chrono::steady_clock::now();
    // The .vlat and the report are renamed into place together, once both are written.
    OutputGroup written;
    const VlatFile& model = run.model;
    // The fit ends with an exact assign to its anchors, which float32 storage keeps as they are: the
    // points' nearest anchors of the model, as encoding would find them again (when it fitted them all).
    const bool nearest_known =
        !sampled && config.assign_precision == AssignPrecision::exact && storage == AnchorStorage::f32;
    const VlatFile file = model_only ? model : during("coding the vectors", [&] {
        PassLine line(!args.quiet && ::isatty(STDERR_FILENO), "coding every row");
        const RowProgress progress = [&](std::size_t done, std::size_t total) { line.rows(done, total); };
        const std::size_t tile_rows = coding_tile_rows(args.anneal, d);
        if (streamed) {
            return encode_streamed(model, *by_rows, args.input, metric, *choice.backend, &context.code_coding,
                                   progress, tile_rows, help.name, args.quiet);
        }
        return encode_with_model(model, points, *choice.backend, model.metadata_json, &context.code_coding,
                                 nearest_known ? &result.assignments : nullptr, progress, tile_rows);
    });
    context.code_seconds = trained_seconds - result.seconds.total - context.other_fits_seconds + seconds_since(start);
    if (!args.quiet) {
        std::printf("%s", describe_trials(run).c_str());
    }
    start = std::chrono::steady_clock::now();
    const Activity writing("writing -o " + args.output);
    write_vlat(args.output, file);
    context.write_seconds = seconds_since(start);

    if (report_file) {
        report_file->stream() << run_report(config, result, context).dump(2) << '\n';
        report_file->commit();
    }
    written.commit();
    if (!args.quiet && model_only) {
        print_model_summary(context.input, result, context, args.output, file);
    } else if (!args.quiet) {
        print_summary(context.input, config.anchors, source ? std::vector<std::size_t>{wanted} : counts, result,
                      context, args.output, file);
    }
    return 0;
}

}  // namespace

int run_compress(int argc, char** argv) {
    return run_guarded(kCompressHelp.name, [&] { return compress(argc, argv, false); });
}

int run_train(int argc, char** argv) {
    return run_guarded(kTrainHelp.name, [&] { return compress(argc, argv, true); });
}

}  // namespace vlattice::cli
