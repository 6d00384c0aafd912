#include "vlattice/pipeline.hpp"

#include "fit/init.hpp"
#include "numeric.hpp"
#include "random.hpp"
#include "vlattice/codec.hpp"
#include "vlattice/half.hpp"
#include "vlattice/memory.hpp"
#include "vlattice/model.hpp"
#include "vlattice/point_format.hpp"
#include "vlattice/rate.hpp"
#include "vlattice/residual.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>

namespace vlattice {

LoadedPoints load_points(const std::string& path, const ReadOptions& options, Metric metric) {
    LoadedPoints loaded;
    loaded.points = read_vectors(path, options);
    check_finite(loaded.points, path);
    if (metric == Metric::angular) {
        loaded.zero_rows = normalize_rows(loaded.points);
    }
    // fit() checks too, but only here is the file known to name it.
    check_accepted_range(loaded.points, path);
    return loaded;
}

LoadedSet load_stored_points(const std::string& path, const ReadOptions& options, Metric metric) {
    if (metric == Metric::angular) {
        if (options.memory_given && options.memory > 0 && std::filesystem::file_size(path) > options.memory) {
            throw Error(path + ": --metric angular scales every row to unit length, in memory as float32, and the "
                        "file alone takes more than --memory's " + byte_size_text(options.memory));
        }
        LoadedPoints loaded = load_points(path, options, metric);
        return {PointSet(std::move(loaded.points)), loaded.zero_rows};
    }
    LoadedSet loaded{read_stored_points(path, options), 0};
    const PointView points = loaded.points.view();
    check_finite(points, path);
    check_accepted_range(points, path);
    return loaded;
}

PreparedRows prepare_rows(Matrix& rows, const std::string& path, Metric metric, std::size_t first_row) {
    check_finite(rows, path, first_row);
    PreparedRows out;
    out.zero_rows = metric == Metric::angular ? normalize_rows(rows) : 0;
    out.largest = largest_magnitude(rows);
    if (!(out.largest <= accepted_range(rows.cols).largest)) {
        check_accepted_range(rows, path, first_row);  // throws, naming the row and the column
    }
    return out;
}

PreparedRows prepare_selected_rows(Matrix& rows, const std::string& path, Metric metric,
                                   const std::vector<std::uint32_t>& ids) {
    try {
        return prepare_rows(rows, path, metric, 0);
    } catch (const Error&) {
        // Found again row by row, to name the row of the file rather than of the selection.
        for (std::size_t s = 0; s < rows.rows; ++s) {
            Matrix one = select_rows(rows, {static_cast<std::uint32_t>(s)});
            prepare_rows(one, path, Metric::l2, ids[s]);
        }
        throw;
    }
}

std::size_t normalize_rows(Matrix& points) {
    std::size_t zero_rows = 0;
#pragma omp parallel for schedule(static) reduction(+ : zero_rows)
    for (std::size_t i = 0; i < points.rows; ++i) {
        float* row = points.row(i);
        const double norm = std::sqrt(squared_norm(row, points.cols));
        if (norm == 0.0) {
            ++zero_rows;
            continue;
        }
        for (std::size_t k = 0; k < points.cols; ++k) {
            row[k] = static_cast<float>(row[k] / norm);
        }
    }
    return zero_rows;
}

nlohmann::json config_json(const AnnealConfig& c) {
    return {
        {"anchors", c.anchors},
        {"max_iters", c.max_iters},
        {"t0", c.t0},
        {"cooling", c.cooling},
        {"t_floor", c.t_floor},
        {"trim", c.trim},
        {"trim_final", c.trim_final},
        {"maintenance_every", c.maintenance_every},
        {"merge_factor", c.merge_factor},
        {"split_factor", c.split_factor},
        {"tolerance", c.tolerance},
        {"min_gain", c.min_gain},
        {"patience", c.patience},
        {"init_sample", c.init_sample},
        {"storage", storage_name(c.storage)},
        {"assign_precision", precision_name(c.assign_precision)},
        {"seed", c.seed},
    };
}

std::vector<std::uint32_t> training_rows(std::size_t n, std::size_t count, std::uint64_t seed) {
    if (n > std::numeric_limits<std::uint32_t>::max()) {
        throw Error("a run takes at most 2^32 - 1 vectors, not " + std::to_string(n));
    }
    Random random(stream_seed(seed, RandomStream::training_rows));
    const std::vector<std::size_t> drawn = draw_sample(n, std::min(count, n), random);
    std::vector<std::uint32_t> rows(drawn.begin(), drawn.end());
    std::sort(rows.begin(), rows.end());
    return rows;
}

nlohmann::json run_metadata(const AnnealConfig& config, const FitResult& result, const RunInput& input) {
    return {
        {"tool", "vlattice"},
        {"tool_version", VLATTICE_VERSION},
        {"input", std::filesystem::path(input.path).filename().string()},
        {"n", input.n},
        {"train_rows", input.train_rows > 0 ? input.train_rows : input.n},
        {"d", input.d},
        {"metric", metric_name(input.metric)},
        {"m_requested", config.anchors},
        {"m", result.anchors.rows},
        {"config", config_json(config)},
        {"iterations", result.iterations},
        {"converged", result.converged},
        {"stop_reason", result.stop_reason},
        {"energy", result.energy},
        {"maintenance",
         {{"merged", result.merged},
          {"split", result.split},
          {"reseeded", result.reseeded},
          {"dropped_empty", result.dropped_empty}}},
    };
}

double equal_assignment_share(const std::vector<std::uint32_t>& a, const std::vector<std::uint32_t>& b) {
    if (a.size() != b.size()) {
        throw Error("cannot compare assignments of " + std::to_string(a.size()) + " and " + std::to_string(b.size()) +
                    " points");
    }
    if (a.empty()) {
        return 1.0;
    }
    std::size_t equal = 0;
#pragma omp parallel for schedule(static) reduction(+ : equal)
    for (std::size_t i = 0; i < a.size(); ++i) {
        equal += a[i] == b[i] ? 1 : 0;
    }
    return static_cast<double>(equal) / static_cast<double>(a.size());
}

std::size_t anchors_for(const CodingSpec& spec, std::size_t n, std::size_t wanted) {
    return spec.budget_bytes ? anchors_within(*spec.budget_bytes, n, wanted) : wanted;
}

std::vector<std::size_t> anchor_counts(const CodingSpec& spec, std::size_t n, std::size_t d, std::size_t wanted) {
    if (spec.file_budget) {
        return file_budget_anchor_counts(*spec.file_budget, n, d, wanted);
    }
    return {anchors_for(spec, n, wanted)};
}

namespace {

// The held-out error of the code a trial's coding chose; a coding without candidates (no budget)
// compares as the worst.
double chosen_error(const TrainedCoding& coding) {
    return coding.candidates.empty() ? std::numeric_limits<double>::infinity()
                                     : coding.candidates[coding.chosen].held_out_mse;
}

}  // namespace

TrainedRun fit_and_train(const PointView& points, const AnnealConfig& config, const std::vector<std::size_t>& counts,
                         const RunInput& input, AnchorStorage storage, const CodingSpec& spec, Backend& backend,
                         const std::function<FitResult(const AnnealConfig&)>& fit_anchors) {
    if (counts.empty()) {
        throw Error("fit_and_train: no anchor count to fit");
    }
    if (spec.file_budget && spec.file_budget->storage != storage) {
        throw Error("fit_and_train: the whole-file budget sizes the anchors as " +
                    std::string(anchor_storage_name(spec.file_budget->storage)) + ", the model stores them as " +
                    anchor_storage_name(storage));
    }
    CodingSpec coding = spec;
    coding.file_vectors = input.n;
    std::vector<AnchorCountTrial> trials;
    TrainedRun best;
    double best_error = 0.0;
    for (const std::size_t count : counts) {
        AnnealConfig fitted = config;
        fitted.anchors = count;
        TrainedRun run;
        run.fit = fit_anchors(fitted);
        run.model = train_model(points, run.fit, input, storage, coding, backend, run_metadata(config, run.fit, input),
                                run.coding);
        // The trial keeps what was measured; the codebooks only the run that is kept.
        AnchorCountTrial trial{run.fit.anchors.rows, run.fit.seconds.total, {}};
        trial.coding.codec = run.coding.codec;
        trial.coding.candidates = run.coding.candidates;
        trial.coding.chosen = run.coding.chosen;
        trial.coding.seconds = run.coding.seconds;
        trials.push_back(std::move(trial));
        // Every kind at every count would multiply the training: once a count has chosen a code,
        // the counts after it train only that kind (on Fashion-MNIST the same kind won at all
        // three counts), each sized for its own side data, beside the scalar code, which has no
        // codebook to fit. A count that could hold no code but the ids leaves every kind to the next.
        if (coding.file_budget && !coding.file_budget->only && run.coding.codec != ResidualCodec::none) {
            coding.file_budget->only = run.coding.candidates[run.coding.chosen].kind;
        }
        const double error = chosen_error(run.coding);
        if (trials.size() == 1 || error < best_error) {
            best = std::move(run);
            best.chosen = trials.size() - 1;
            best_error = error;
        }
    }
    if (trials.size() > 1) {
        nlohmann::json tried = nlohmann::json::array();
        for (const AnchorCountTrial& trial : trials) {
            nlohmann::json entry = {{"m", trial.anchors}, {"code", "ids only"}, {"held_out_mse", nullptr}};
            if (!trial.coding.candidates.empty()) {
                const CodingCandidate& kept = trial.coding.candidates[trial.coding.chosen];
                entry["code"] = kept.description;
                entry["held_out_mse"] = kept.held_out_mse;
            }
            tried.push_back(entry);
        }
        nlohmann::json metadata = nlohmann::json::parse(best.model.metadata_json);
        metadata["residuals"]["anchor_counts"] = tried;
        best.model.metadata_json = metadata.dump();
    }
    best.trials = std::move(trials);
    if (coding.file_budget) {
        VlatShape shape = vlat_shape(best.model);
        shape.n = input.n;
        const std::uint64_t bytes = vlat_file_bytes(shape);
        const std::uint64_t total = file_budget_total(*coding.file_budget, input.n);
        if (bytes > total) {
            throw Error("the file would take " + std::to_string(bytes) + " bytes, more than the whole-file budget's " +
                        std::to_string(total) + ": its metadata (" + std::to_string(shape.metadata_bytes) +
                        " bytes) is larger than the " + std::to_string(coding.file_budget->metadata_bytes) +
                        " set aside for it");
        }
    }
    return best;
}

VlatFile train_model(const PointView& points, const FitResult& result, const RunInput& input, AnchorStorage storage,
                  const CodingSpec& spec, Backend& backend, nlohmann::json metadata, TrainedCoding& coding) {
    if (input.d > std::numeric_limits<std::uint32_t>::max()) {
        throw Error(input.path + ": dimension " + std::to_string(input.d) + " does not fit the .vlat header (32 bits)");
    }
    const Matrix stored = stored_anchors(result.anchors, storage);
    const std::vector<std::uint32_t> assignments =
        storage == AnchorStorage::f32 ? result.assignments : nearest_anchors(points, stored, backend);
    // A residual code trains on float32 rows: points of another stored type are widened for it (a
    // run that trains on --train-sample widens only the sample); the ids alone read no row.
    Matrix widened;
    const Matrix& rows = coding_reads_points(spec) ? as_matrix(points, widened) : widened;
    coding = train_coding(rows, stored, assignments, spec, backend);
    metadata["residuals"] = coding_json(spec, coding);
    return make_model(stored, storage, input.metric, coding, metadata.dump());
}

void add_residual_codes(VlatFile& file, const Matrix& points, const std::vector<std::uint8_t>& widths) {
    if (file.anchor_storage == AnchorStorage::f16) {
        for (float& value : file.anchors.data) {
            value = half_to_float(float_to_half(value));
        }
    }
    file.residuals = encode_residuals(points, file.anchors, file.assignments, widths);
    file.codec = ResidualCodec::scalar;
}

nlohmann::json coding_json(const CodingSpec& spec, const TrainedCoding& coding) {
    nlohmann::json candidates = nlohmann::json::array();
    for (const CodingCandidate& candidate : coding.candidates) {
        candidates.push_back({{"code", candidate.description},
                              {"code_bytes", candidate.code_bytes},
                              {"held_out_mse", candidate.held_out_mse},
                              {"file_mse", candidate.file_mse}});
        if (spec.file_budget) {
            candidates.back()["file_bytes"] = candidate.file_bytes;
        }
    }
    nlohmann::json out = {{"codec", codec_name(coding.codec)},
                          {"family", codec_family_name(spec.family)},
                          {"target_bytes", nullptr},
                          {"candidates", candidates}};
    if (spec.budget_bytes) {
        out["target_bytes"] = *spec.budget_bytes;
    }
    if (spec.file_budget) {
        out["target_file_bytes"] = spec.file_budget->bytes_per_vector;
    }
    if (coding.codec == ResidualCodec::scalar) {
        out["widths"] = describe_widths(coding.scalar.layout.bits);
    } else if (coding.codec == ResidualCodec::product) {
        out["product"] = describe_product(coding.product);
        out["opq_iters"] = spec.product.opq_iters;
        out["opq_min_gain"] = spec.product.opq_min_gain;
    }
    return out;
}

}  // namespace vlattice
