// compress over the ranks of mpirun or srun: every rank reads only its own rows and fits them with
// the others (a backend on a RowShare, the CPU's or a GPU's, whose fit is one process's on that
// backend, bit for bit), codes its rows' ids with the anchors, and rank 0 gathers the ids and
// writes the outputs, so the .vlat is the one a single process writes.
#include "activity.hpp"
#include "anchor_source.hpp"
#include "coding_options.hpp"
#include "compress_args.hpp"
#include "process_ranks.hpp"

#include "vlattice/anneal.hpp"
#include "vlattice/atomic_file.hpp"
#include "vlattice/codec.hpp"
#include "vlattice/coding_plan.hpp"
#include "vlattice/cpu_backend.hpp"
#ifdef VLATTICE_HAVE_CUDA
#include "vlattice/cuda_backend.hpp"
#endif
#include "vlattice/device.hpp"
#include "vlattice/format.hpp"
#include "vlattice/model.hpp"
#include "vlattice/pipeline.hpp"
#include "vlattice/report.hpp"

#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>

namespace vlattice::cli {

namespace {

// What a run over ranks cannot do yet: each needs every row in one place. A residual code trains
// on the --train-sample rows, which every rank then holds.
void refuse_what_ranks_cannot(const CompressArgs& args, const CodingSpec& coding, bool sampled) {
    const auto refuse = [](const std::string& what) {
        throw UsageError("under mpirun or srun, compress does not take " + what + " yet; run it as one process");
    };
    if (coding.file_budget) {
        refuse("a whole-file budget (--target-file-bytes, --target-file-ratio)");
    }
    if (!args.anchors_from.empty()) {
        refuse("--anchors-from");
    }
    if (coding_reads_points(coding) && !sampled) {
        throw UsageError("under mpirun or srun, a residual code (--bits, --codec, a budget) trains on the "
                         "--train-sample rows, which every rank then holds: give --train-sample N, below the "
                         "row count");
    }
}

// One kind of backend on every rank, so that all measure the distances alike: the GPU where every
// rank has one usable (`auto`; the local rank's, unless --gpu names one) or under --device cuda (a
// rank without one stops them all), else the CPU. `single` makes one of the same kind for one
// process's work (a residual code's training).
struct RankBackend {
    std::unique_ptr<Backend> fit;
    std::function<std::unique_ptr<Backend>()> single;
};

RankBackend rank_backend(const CompressArgs& args, const po::variables_map& values, DeviceKind device,
                         const RowShare& share) {
    const AnnealConfig& config = args.anneal.config;
    const int gpu = rank_gpu(args.anneal.gpu, values["gpu"].defaulted());
    const GpuStatus status = device == DeviceKind::cpu ? GpuStatus{} : gpu_status(gpu);
    if (device == DeviceKind::cuda && !status.usable) {
        throw Error("--device cuda: no usable GPU " + std::to_string(gpu) + ": " + status.description);
    }
    std::uint64_t without = device == DeviceKind::cpu || !status.usable ? 1 : 0;
    share.ranks->max(&without, 1);
#ifdef VLATTICE_HAVE_CUDA
    if (without == 0) {
        const auto on_gpu = [gpu, &args](const RowShare& part) {
            return make_cuda_backend(gpu, FastKernel::automatic, kGatherFloats, args.anneal.kernels,
                                     args.anneal.gpu_memory_bytes, part);
        };
        return {on_gpu(share), [on_gpu] { return on_gpu(RowShare{}); }};
    }
#endif
    const int threads = config.threads;
    return {make_cpu_backend(threads, share), [threads] { return make_cpu_backend(threads); }};
}

// A fingerprint of what a model codes with: its anchors, residual ranges and product codebook.
std::uint64_t model_fingerprint(const VlatFile& model) {
    std::uint64_t hash = 0;
    const auto add = [&](const auto& values) {
        hash = XXH3_64bits_withSeed(values.data(), values.size() * sizeof(values[0]), hash);
    };
    add(model.anchors.data);
    add(model.residuals.offset.data);
    add(model.residuals.step.data);
    add(model.residuals.layout.bits);
    add(model.product.book.rotation.data);
    add(model.product.book.centroids.data);
    add(model.product.book.bounds);
    const std::uint64_t shape[] = {model.product.book.bits, model.product.book.stages};
    hash = XXH3_64bits_withSeed(shape, sizeof shape, hash);
    return hash;
}

// Every rank trains the residual code alone, on the same rows, and codes its rows with it, while
// rank 0 writes its own: ranks whose models differ (GPUs of other models rounding a sum
// otherwise) would leave codes that decode wrong, so the run stops instead.
void check_same_model(Collective& ranks, const VlatFile& model) {
    const std::uint64_t mine = model_fingerprint(model);
    std::uint64_t most[2] = {mine, ~mine};  // the largest fingerprint and the complement of the smallest
    ranks.max(most, 2);
    if (most[0] != mine || most[1] != ~mine) {
        throw Error("the ranks trained different residual codes from the same rows (GPUs or libraries that round "
                    "otherwise); run the ranks on one kind of GPU, or with --device cpu");
    }
}

// Every rank's part (`count` values from `first`) of `total` values, in order, into `all` on every rank.
template <class T>
void share_parts(Collective& ranks, const T* mine, std::size_t count, std::size_t first, T* all, std::size_t total) {
    std::fill(all, all + total, T{});
    std::copy(mine, mine + count, all + first);
    share_values(ranks, all, total);
}

// Every rank's codes, `bytes` each, in row order, into `all` on rank 0.
void gather_codes(Collective& ranks, const std::vector<std::uint8_t>& mine, std::size_t n, std::size_t bytes,
                  std::vector<std::uint8_t>& all) {
    std::vector<std::uint8_t> gathered(ranks.rank() == 0 ? n * bytes : 0);
    ranks.gather_to_first(mine.data(), mine.size(), gathered.data(), gathered.size());
    all = std::move(gathered);
}

}  // namespace

int compress_on_ranks(const CommandHelp& help, CompressArgs& args, const po::variables_map& values,
                      Collective& ranks) {
    const bool lead = ranks.rank() == 0;
    const bool quiet = args.quiet || !lead;
    const std::vector<NamedPath> outputs{{"-o", args.output}, {"--report", args.report}};
    check_outputs(outputs, {{"INPUT", args.input}});
    AnnealConfig& config = args.anneal.config;
    config.threads = rank_threads(config.threads);
    const AnchorStorage storage = parse_option_value([&] { return parse_anchor_storage(args.anchor_storage); });
    const DeviceKind device = parse_option_value([&] { return parse_device(args.device); });
    args.input = input_file(args.input, args.anneal);
    const Metric metric = metric_of(args.anneal, args.input);
    std::optional<AtomicFile> report_file;
    if (lead) {
        clear_stale_temporaries(help.name, outputs, quiet);
        AtomicFile{args.output};
        if (!args.report.empty()) {
            report_file.emplace(args.report);
        }
    }

    auto start = std::chrono::steady_clock::now();
    const std::unique_ptr<VectorRows> by_rows =
        open_vector_rows(args.input, ReadOptions{args.anneal.dataset, args.anneal.input_format});
    if (!by_rows) {
        throw Error(args.input + ": under mpirun or srun each rank reads its own rows, and this dataset cannot be "
                    "read by rows (a chunked or compressed HDF5 dataset, or a type libhdf5 alone converts)");
    }
    const std::size_t n = by_rows->rows(), d = by_rows->cols();
    const auto sample = static_cast<std::size_t>(args.train_sample);
    const bool sampled = sample > 0 && sample < n;
    const CodingSpec coding = coding_spec(values, args.coding, d, config);
    refuse_what_ranks_cannot(args, coding, sampled);
    const bool codes = coding_reads_points(coding);
    // A budget of code bytes lowers -m to the count whose ids it holds.
    const std::size_t wanted = config.anchors;
    config.anchors = anchor_counts(coding, n, d, wanted).front();
    if (!quiet && coding.budget_bytes && config.anchors != wanted) {
        print_notice(help.name, "note",
                     "the budget of " + show(*coding.budget_bytes) + " bytes per vector holds the ids of " +
                         std::to_string(config.anchors) + " anchors, not " + std::to_string(wanted));
    }
    if (const std::string note = budget_note(coding, n, config.anchors, d); !note.empty() && !quiet) {
        print_notice(help.name, "note", note);
    }
    // Ranks hold whole blocks of 1,024 rows (rank_rows), and rank 0 is the first left without one.
    if (rank_rows(n, ranks.size(), 0).count == 0) {
        throw Error(args.input + ": " + std::to_string(n) + " rows leave some of the " + std::to_string(ranks.size()) +
                    " ranks without a block of 1,024 rows: run at most one rank per 1,024 rows");
    }
    const RowRange mine = rank_rows(n, ranks.size(), ranks.rank());
    Matrix rows;
    // Under angular each rank scales its own rows; the zero rows of all are counted once.
    std::uint64_t zero_rows = 0;
    during("reading rows " + std::to_string(mine.first) + " to " + std::to_string(mine.first + mine.count) +
               " of INPUT " + args.input,
           [&] {
               by_rows->read_range(mine.first, mine.count, rows);
               zero_rows = prepare_rows(rows, args.input, metric, mine.first).zero_rows;
           });
    ranks.sum(&zero_rows, 1);
    warn_zero_rows(help.name, zero_rows, quiet);
    const PointView points(rows);

    // --train-sample: the sample's rows, in row order, split between the ranks as a set of their
    // own, each rank reading its part of them from the file; the fit over them is one process's.
    Matrix training;
    RowShare share{&ranks, mine.first, n};
    if (sampled) {
        check_train_sample(sample, config.anchors);
        if (rank_rows(sample, ranks.size(), 0).count == 0) {
            throw Error("--train-sample " + std::to_string(sample) + " leaves some of the " +
                        std::to_string(ranks.size()) +
                        " ranks without a block of 1,024 sample rows: run at most one rank per 1,024 of them");
        }
        const std::vector<std::uint32_t> drawn = training_rows(n, sample, config.seed);
        const RowRange part = rank_rows(sample, ranks.size(), ranks.rank());
        const std::vector<std::uint32_t> own(drawn.begin() + static_cast<std::ptrdiff_t>(part.first),
                                             drawn.begin() + static_cast<std::ptrdiff_t>(part.first + part.count));
        training = during("reading this rank's --train-sample rows of INPUT " + args.input, [&] {
            Matrix read = by_rows->selection(own);
            prepare_selected_rows(read, args.input, metric, own);  // its zero rows are counted with the rest
            return read;
        });
        share = RowShare{&ranks, part.first, sample};
        if (!quiet) {
            print_notice(help.name, "note",
                         "the anchors train on " + std::to_string(sample) + " of the " + std::to_string(n) +
                             " rows (--train-sample); every row is then assigned and coded");
        }
    }
    const PointView fitted_points = sampled ? PointView(training) : points;
    // A residual code trains on the whole sample, on every rank alike, as one process trains it.
    Matrix whole_sample;
    if (codes) {
        whole_sample = Matrix(sample, d);
        share_parts(ranks, training.data.data(), training.data.size(), share.first_row * d, whole_sample.data.data(),
                    sample * d);
    }
    const PointView trained_points = codes ? PointView(whole_sample) : fitted_points;

    ReportContext context;
    const RankBackend backends = rank_backend(args, values, device, share);
    Backend* backend = backends.fit.get();
    const std::unique_ptr<Backend> trainer = codes ? backends.single() : nullptr;
    context.backend = backend->name();
    context.threads = config.threads;
    context.load_seconds = seconds_since(start);
    context.input = {args.input, n, d, metric};
    context.input.train_rows = sampled ? sample : n;
    start = std::chrono::steady_clock::now();
    const TrainedRun run = during("training the residual code", [&] {
        return fit_and_train(trained_points, config, {config.anchors}, context.input, storage, coding,
                             codes ? *trainer : *backend, [&](const AnnealConfig& fitted) {
                                 FitResult fitted_anchors =
                                     fit_or_reuse(std::nullopt, "", fitted_points, fitted, *backend, quiet);
                                 if (codes) {
                                     std::vector<std::uint32_t> all(sample);
                                     share_parts(ranks, fitted_anchors.assignments.data(),
                                                 fitted_anchors.assignments.size(), share.first_row, all.data(),
                                                 sample);
                                     fitted_anchors.assignments = std::move(all);
                                 }
                                 return fitted_anchors;
                             });
    });
    const FitResult& result = run.fit;
    if (codes) {
        check_same_model(ranks, run.model);
    }
    const double trained_seconds = seconds_since(start);
    start = std::chrono::steady_clock::now();
    // This rank's ids from its own assignments (the fit's last assign is exact, to float32
    // anchors), with a backend of its own: the coding exchanges nothing.
    auto coder = make_cpu_backend(config.threads);
    const bool nearest_known =
        !sampled && config.assign_precision == AssignPrecision::exact && storage == AnchorStorage::f32;
    const VlatFile part = during("coding the vectors", [&] {
        return encode_with_model(run.model, points, *coder, run.model.metadata_json, &context.code_coding,
                                 nearest_known ? &result.assignments : nullptr, {}, coding_tile_rows(args.anneal, d));
    });
    std::vector<std::uint32_t> ids(lead ? n : 0);
    ranks.gather_to_first(part.assignments.data(), part.assignments.size() * sizeof(std::uint32_t), ids.data(),
                          ids.size() * sizeof(std::uint32_t));
    VlatFile file = part;
    if (!part.residuals.empty()) {
        gather_codes(ranks, part.residuals.codes, n, part.residuals.layout.code_bytes, file.residuals.codes);
    }
    if (!part.product.empty()) {
        gather_codes(ranks, part.product.codes, n, part.product.book.code_bytes(), file.product.codes);
    }
    context.code_seconds = trained_seconds - result.seconds.total + seconds_since(start);
    if (!lead) {
        return 0;
    }
    file.sections.clear();
    file.file_bytes = 0;
    file.n = n;
    file.assignments = std::move(ids);
    start = std::chrono::steady_clock::now();
    OutputGroup written;
    {
        const Activity writing("writing -o " + args.output);
        write_vlat(args.output, file);
    }
    context.write_seconds = seconds_since(start);
    if (report_file) {
        nlohmann::json report = run_report(config, result, context);
        report["ranks"] = ranks.size();
        report_file->stream() << report.dump(2) << '\n';
        report_file->commit();
    }
    written.commit();
    if (!quiet) {
        std::printf("vectors     %zu x %zu (%s), over %d ranks (%s)\n", n, d, metric_name(metric), ranks.size(),
                    backend->name());
        std::printf("anchors     %zu requested, %zu final\n", wanted, result.anchors.rows);
        std::printf("iterations  %d (%s)\n", result.iterations, result.stop_reason.c_str());
        std::printf("energy      %.9g\n", result.energy);
        std::printf("seconds     %.3f (load %.3f, fit %.3f, code %.3f, write %.3f; rank 0)\n",
                    context.load_seconds + result.seconds.total + context.code_seconds + context.write_seconds,
                    context.load_seconds, result.seconds.total, context.code_seconds, context.write_seconds);
        std::printf("output      %s\n", args.output.c_str());
    }
    return 0;
}

}  // namespace vlattice::cli
