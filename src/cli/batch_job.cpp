#include "batch_job.hpp"

#include "anneal_options.hpp"
#include "batch_resume.hpp"
#include "device_note.hpp"
#include "process_ranks.hpp"
#include "progress.hpp"

#include "vlattice/anneal.hpp"
#include "vlattice/atomic_file.hpp"
#include "vlattice/codec.hpp"
#include "vlattice/device.hpp"
#include "vlattice/format.hpp"
#include "vlattice/io.hpp"
#include "vlattice/model.hpp"
#include "vlattice/pipeline.hpp"
#include "vlattice/rate.hpp"
#include "vlattice/residual.hpp"
#include "vlattice/results_file.hpp"
#include "vlattice/search.hpp"

#include <chrono>
#include <cstdio>
#include <optional>
#include <unistd.h>

namespace vlattice::cli {

namespace {

constexpr std::size_t kRecallAt = 10;

struct Evaluation {
    Matrix queries;
    IdMatrix neighbors;
};

// The HDF5 input's `test` and `neighbors`, checked against the n x d vectors of `train_name`; none
// for other formats or files without both.
std::optional<Evaluation> load_evaluation(const std::string& file, const std::string& train_name, Metric metric,
                                          std::size_t n, std::size_t d) {
    if (!is_hdf5_path(file) || !has_hdf5_dataset(file, "test") || !has_hdf5_dataset(file, "neighbors")) {
        return std::nullopt;
    }
    Evaluation evaluation{load_points(file, ReadOptions{"test"}, metric).points,
                          read_ids(file, ReadOptions{"neighbors"})};
    const std::string test_name = file + ":test";
    const std::string neighbors_name = file + ":neighbors";
    if (evaluation.queries.cols != d) {
        throw Error(test_name + ": the queries have " + std::to_string(evaluation.queries.cols) + " dimensions, " +
                    train_name + " has " + std::to_string(d));
    }
    if (evaluation.neighbors.rows != evaluation.queries.rows || evaluation.neighbors.cols < kRecallAt) {
        throw Error(neighbors_name + ": " + std::to_string(evaluation.neighbors.rows) + " x " +
                    std::to_string(evaluation.neighbors.cols) + " ids; 10-recall@10 of the " +
                    std::to_string(evaluation.queries.rows) + " queries in " + test_name +
                    " needs one row per query of at least " + std::to_string(kRecallAt) + " ids");
    }
    check_vector_ids(evaluation.neighbors, n, neighbors_name);
    return evaluation;
}

}  // namespace

nlohmann::json run_job(const Job& job, const JobPlan& plan, const BatchArgs& args, const po::variables_map& values) {
    using clock = std::chrono::steady_clock;
    AnnealArgs anneal = job.anneal;
    AnnealConfig& config = anneal.config;
    const DeviceKind device = parse_option_value([&] { return parse_device(job.device); });

    auto start = clock::now();
    const LoadedSet loaded = load_input("batch", job.file, anneal, plan.metric, args.quiet);
    const PointView points = loaded.points.view();
    const std::string train_name = is_hdf5_path(job.file) ? job.file + ":" + anneal.dataset : job.file;
    const std::optional<Evaluation> evaluation =
        load_evaluation(job.file, train_name, plan.metric, points.rows, points.cols);
    const double load_seconds = seconds_since(start);
    CodingSpec coding = coding_spec(values, args.coding, points.cols, config);
    if (job.bits) {
        coding.scalar_bits = *job.bits;
    }
    const std::vector<std::size_t> counts =
        anchor_counts(coding, points.rows, points.cols, config.anchors);
    if (!coding.file_budget) {
        config.anchors = counts.front();
    }
    config.threads = rank_threads(config.threads);
    BackendChoice choice = make_backend(device, rank_gpu(anneal.gpu, values["gpu"].defaulted()), config.threads,
                                        anneal.kernels, anneal.gpu_memory_bytes);
    print_device_note("batch", choice.note, args.quiet);

    OutputGroup outputs;
    const auto sample = static_cast<std::size_t>(args.train_sample);
    const bool sampled = sample > 0 && sample < points.rows;
    if (sampled) {
        check_train_sample(sample, counts.front());
    }
    const Matrix training = sampled ? points.select(training_rows(points.rows, sample, config.seed)) : Matrix();
    const PointView fitted_points = sampled ? PointView(training) : points;
    RunInput input{job.file, points.rows, points.cols, plan.metric};
    input.train_rows = fitted_points.rows;
    start = clock::now();
    const TrainedRun run = fit_and_train(
        fitted_points, config, counts, input, AnchorStorage::f32, coding, *choice.backend,
        [&](const AnnealConfig& fitted) {
            ProgressBar progress(!args.quiet && ::isatty(STDERR_FILENO), fitted.max_iters, fitted_points.rows);
            FitResult result = fit(fitted_points, fitted, *choice.backend,
                                   [&](const IterationRecord& record) { progress.update(record); });
            progress.finish();
            return result;
        });
    const FitResult& result = run.fit;
    const VlatFile& model = run.model;
    const VlatFile vlat = encode_with_model(model, points, *choice.backend, model.metadata_json);
    write_vlat(plan.outputs.vlat, vlat);
    // Every anchor count's fit (one without a whole-file budget) counts as fitting, the rest as writing.
    double fit_seconds = 0.0;
    for (const AnchorCountTrial& trial : run.trials) {
        fit_seconds += trial.fit_seconds;
    }
    const double write_seconds = seconds_since(start) - fit_seconds;

    start = clock::now();
    nlohmann::json recall = nullptr;
    if (evaluation) {
        SearchOptions exhaustive;
        exhaustive.k = kRecallAt;
        recall = recall_at(search(vlat, evaluation->queries, exhaustive), evaluation->neighbors, kRecallAt);
    }
    // The fit's energy is its training rows'; a sampled job measures every row's.
    const double mse =
        vlat.codec == ResidualCodec::none && !sampled ? result.energy : reconstruction_mse(vlat, points);
    const double evaluate_seconds = seconds_since(start);

    const double code_bytes = code_bytes_per_vector(vlat);
    const nlohmann::json row = {
        {"dataset", job.name},
        {"file", job.file},
        {"n", points.rows},
        {"d", points.cols},
        {"m", result.anchors.rows},
        {"train_rows", fitted_points.rows},
        {"bytes_per_vector", code_bytes},
        {"ratio", code_bytes / (4.0 * static_cast<double>(points.cols))},
        {"energy", result.energy},
        {"mse", mse},
        {"residuals", vlat.codec == ResidualCodec::product ? "pq " + describe_product(vlat.product.book)
                      : vlat.residuals.empty()                 ? std::string("none")
                                                               : describe_widths(vlat.residuals.layout.bits)},
        {"recall_at_10", recall},
        {"seconds", {{"load", load_seconds}, {"init", result.seconds.init}, {"fit", fit_seconds},
                     {"evaluate", evaluate_seconds}, {"write", write_seconds}}},
        {"device", choice.backend->name()},
        {"status", "ok"},
        {"error", ""},
    };
    nlohmann::json settings = config_json(config);
    settings["metric"] = metric_name(plan.metric);
    settings["dataset"] = plan.options["dataset"];
    settings["made_from"] = made_from(plan.input, plan.options, file_fingerprint(outputs.written(plan.outputs.vlat)));
    write_results_h5(plan.outputs.results, result.anchors, vlat.assignments, settings, row);
    outputs.commit();
    if (!args.quiet) {
        std::fprintf(stderr, "vlattice batch: job %zu of %zu: %s: energy %.6g, recall@10 %s, %.2f s\n", plan.index + 1,
                     plan.count, job.name.c_str(), result.energy, recall.is_null() ? "-" : recall.dump().c_str(),
                     load_seconds + fit_seconds + write_seconds + evaluate_seconds);
    }
    return row;
}

}  // namespace vlattice::cli
