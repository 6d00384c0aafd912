// compress over the ranks of mpirun or srun: every rank reads only its own rows and fits them with
// the others (a backend on a RowShare, the CPU's or a GPU's, whose fit is one process's on that
// backend, bit for bit), codes its rows' ids with the anchors, and rank 0 gathers the ids and
// writes the outputs, so the .vlat is the one a single process writes.
#include "activity.hpp"
#include "anchor_source.hpp"
#include "compress_args.hpp"

#include "vlattice/anneal.hpp"
#include "vlattice/atomic_file.hpp"
#include "vlattice/codec.hpp"
#include "vlattice/cpu_backend.hpp"
#ifdef VLATTICE_HAVE_CUDA
#include "vlattice/cuda_backend.hpp"
#endif
#include "vlattice/device.hpp"
#include "vlattice/format.hpp"
#include "vlattice/model.hpp"
#include "vlattice/pipeline.hpp"
#include "vlattice/report.hpp"

#include <chrono>
#include <cstdio>
#include <optional>

namespace vlattice::cli {

namespace {

// What a run over ranks cannot do yet: each needs every row in one place, or a backend that
// exchanges with the others.
void refuse_what_ranks_cannot(const CompressArgs& args, const CodingSpec& coding) {
    const auto refuse = [](const std::string& what) {
        throw UsageError("under mpirun or srun, compress does not take " + what +
                         " yet (it writes the anchors and ids); run it as one process");
    };
    if (coding.budget_bytes || coding.file_budget || coding.scalar_bits > 0 ||
        (coding.family != CodecFamily::automatic && coding.family != CodecFamily::scalar)) {
        refuse("a residual code (--bits, --codec, a budget)");
    }
    if (!args.anchors_from.empty()) {
        refuse("--anchors-from");
    }
}

// One kind of backend on every rank, so that all measure the distances alike: the GPU where every
// rank has one usable (`auto`; the local rank's, unless --gpu names one) or under --device cuda (a
// rank without one stops them all), else the CPU.
std::unique_ptr<Backend> rank_backend(const CompressArgs& args, const po::variables_map& values, DeviceKind device,
                                      const RowShare& share) {
    const AnnealConfig& config = args.anneal.config;
    int gpu = args.anneal.gpu;
    if (values["gpu"].defaulted()) {
        const int gpus = gpu_count();
        gpu = gpus > 0 ? local_rank() % gpus : 0;
    }
    const GpuStatus status = device == DeviceKind::cpu ? GpuStatus{} : gpu_status(gpu);
    if (device == DeviceKind::cuda && !status.usable) {
        throw Error("--device cuda: no usable GPU " + std::to_string(gpu) + ": " + status.description);
    }
    std::uint64_t without = device == DeviceKind::cpu || !status.usable ? 1 : 0;
    share.ranks->max(&without, 1);
#ifdef VLATTICE_HAVE_CUDA
    if (without == 0) {
        return make_cuda_backend(gpu, FastKernel::automatic, kGatherFloats, args.anneal.kernels,
                                 args.anneal.gpu_memory_bytes, share);
    }
#endif
    return make_cpu_backend(config.threads, share);
}

}  // namespace

int compress_on_ranks(const CommandHelp& help, CompressArgs& args, const po::variables_map& values,
                      Collective& ranks) {
    const bool lead = ranks.rank() == 0;
    const bool quiet = args.quiet || !lead;
    const std::vector<NamedPath> outputs{{"-o", args.output}, {"--report", args.report}};
    check_outputs(outputs, {{"INPUT", args.input}});
    AnnealConfig& config = args.anneal.config;
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
    const CodingSpec coding = coding_spec(values, args.coding, d, config);
    refuse_what_ranks_cannot(args, coding);
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
    if (zero_rows > 0 && !quiet) {
        print_notice(help.name, "warning",
                     std::to_string(zero_rows) + " vectors are all zero; with --metric angular they have no "
                     "direction and stay zero");
    }
    const PointView points(rows);

    // --train-sample: the sample's rows, in row order, split between the ranks as a set of their
    // own, each rank reading its part of them from the file; the fit over them is one process's.
    const auto sample = static_cast<std::size_t>(args.train_sample);
    const bool sampled = sample > 0 && sample < n;
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

    ReportContext context;
    auto backend = rank_backend(args, values, device, share);
    context.backend = backend->name();
    context.threads = config.threads;
    context.load_seconds = seconds_since(start);
    context.input = {args.input, n, d, metric};
    context.input.train_rows = sampled ? sample : n;
    start = std::chrono::steady_clock::now();
    const TrainedRun run = during("training the residual code", [&] {
        return fit_and_train(fitted_points, config, {config.anchors}, context.input, storage, coding, *backend,
                             [&](const AnnealConfig& fitted) {
                                 return fit_or_reuse(std::nullopt, "", fitted_points, fitted, *backend, quiet);
                             });
    });
    const FitResult& result = run.fit;
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
    ranks.gather_to_first(part.assignments.data(), part.assignments.size() * sizeof(std::uint32_t), ids.data());
    context.code_seconds = trained_seconds - result.seconds.total + seconds_since(start);
    if (!lead) {
        return 0;
    }
    VlatFile file = part;
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
        std::printf("anchors     %zu requested, %zu final\n", config.anchors, result.anchors.rows);
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
