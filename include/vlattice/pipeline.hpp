// The steps a command runs between its arguments and its output files: load the points the way the
// metric needs them, and package a finished run as a .vlat. The CLI sub-commands (and the batch and
// compare commands) share these so that each of them stays a thin layer over the library.
#pragma once

#include "vlattice/anneal.hpp"
#include "vlattice/coding_plan.hpp"
#include "vlattice/config.hpp"
#include "vlattice/format.hpp"
#include "vlattice/io.hpp"
#include "vlattice/types.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace vlattice {

struct LoadedPoints {
    Matrix points;
    // Rows that were all zero under Metric::angular: they have no direction and stay zero, which
    // the caller may want to warn about.
    std::size_t zero_rows = 0;
};

// read_vectors + check_finite, then for Metric::angular every row scaled to unit length; throws
// Error naming the file, the row and the column when the values lie outside what a fit accepts
// (check_accepted_range: queries and references are held to it too, as they meet the same anchors).
LoadedPoints load_points(const std::string& path, const ReadOptions& options, Metric metric);

struct LoadedSet {
    PointSet points;  // view() only once the set has its place: a move would leave the view behind
    std::size_t zero_rows = 0;  // as LoadedPoints
};

// load_points for the input of a fit or a coding: float16, uint8 and int8 values stay in their type
// (read_stored_points) and are checked as they are, unless Metric::angular scales the rows, which
// needs float32.
LoadedSet load_stored_points(const std::string& path, const ReadOptions& options, Metric metric);

// Scales each row to unit L2 length in place; returns how many rows were zero (and stay zero).
std::size_t normalize_rows(Matrix& points);

// What prepare_rows found of a part of a file.
struct PreparedRows {
    std::size_t zero_rows = 0;  // rows that were zero under Metric::angular
    float largest = 0.0f;       // the largest |coordinate|, once prepared
};

// What load_points does to a whole file, done to rows [first_row, first_row + rows.rows) of one:
// each row finite and within the accepted range's largest magnitude, errors naming the file's row,
// then under Metric::angular scaled to unit length. The scale of the whole file (check_accepted_range's
// smallest) is the caller's to check once it has seen every part, from each part's largest.
PreparedRows prepare_rows(Matrix& rows, const std::string& path, Metric metric, std::size_t first_row);
// The same for a selection of a file's rows, `ids` their rows in the file (errors name those).
PreparedRows prepare_selected_rows(Matrix& rows, const std::string& path, Metric metric,
                                   const std::vector<std::uint32_t>& ids);

// What a run was given, for its metadata and its report.
struct RunInput {
    std::string path;  // only the file name goes into the metadata
    std::size_t n = 0;
    std::size_t d = 0;
    Metric metric = Metric::l2;
    // The rows the anchors and the residual code were trained on (--train-sample); 0: all n.
    std::size_t train_rows = 0;
};

// The rows a run trains on when it trains on `count` of its n rows (--train-sample): drawn without
// replacement from the seed's own random stream, in increasing order; all n when count >= n. The
// draw keeps memory of the sample's size, not of n.
std::vector<std::uint32_t> training_rows(std::size_t n, std::size_t count, std::uint64_t seed);

// The parameters that decide a run's result; the thread count is left out because it does not.
nlohmann::json config_json(const AnnealConfig& config);

// Metadata stored in the .vlat. Only what decides or describes the result goes in (no timings,
// dates, paths, thread count or backend), so the same input and seed give a byte-identical file on
// any machine with the same backend (the CPU and the GPU differ in the last bits of their sums).
nlohmann::json run_metadata(const AnnealConfig& config, const FitResult& result, const RunInput& input);

// The share of the n points two runs put on the same anchor id, in [0, 1]; 1 for n = 0. Ids only
// mean the same anchor when both runs started from the same init and kept their anchors in the same
// order, so callers comparing runs whose anchor counts differ must say the share is of raw ids.
// Throws Error when the two lengths differ.
double equal_assignment_share(const std::vector<std::uint32_t>& a, const std::vector<std::uint32_t>& b);

// The anchor count to fit: `wanted`, or fewer when the budget cannot hold the ids of that many.
std::size_t anchors_for(const CodingSpec& spec, std::size_t n, std::size_t wanted);

// The anchor counts a run fits, in order: under a whole-file budget file_budget_anchor_counts (from
// `wanted` down), else anchors_for alone.
std::vector<std::size_t> anchor_counts(const CodingSpec& spec, std::size_t n, std::size_t d, std::size_t wanted);

// One anchor count a run tried, and what its coding measured.
struct AnchorCountTrial {
    std::size_t anchors = 0;  // the fit's final count
    double fit_seconds = 0.0;
    TrainedCoding coding;  // the candidates, the choice and the seconds; the codebooks are the kept run's
};

// A fit and the model trained on it.
struct TrainedRun {
    FitResult fit;
    VlatFile model;
    TrainedCoding coding;
    std::vector<AnchorCountTrial> trials;  // every count tried, in order (one without a file budget)
    std::size_t chosen = 0;                // the trial kept
};

// For each count of `counts` (at least one), fits the anchors on `points` (fit_anchors with a copy
// of `config` whose anchors is the count) and trains the model on them (train_model, its metadata
// from `config`, so that m_requested is the caller's), its codes sized for a file of input.n vectors
// (`points` are those n, or the rows the run trains on); keeps the one whose chosen code had the lowest held-out error (the
// first on a tie). The metadata records every count tried. Under a whole-file budget (whose anchor
// storage must be `storage`) the counts after the first that chose a code train only that kind of
// code and the scalar code (FileBudget::only); it throws Error should the chosen file, with its actual metadata, exceed
// the budget.
TrainedRun fit_and_train(const PointView& points, const AnnealConfig& config, const std::vector<std::size_t>& counts,
                         const RunInput& input, AnchorStorage storage, const CodingSpec& spec, Backend& backend,
                         const std::function<FitResult(const AnnealConfig&)>& fit_anchors);

// A finished fit's model (model.hpp): the anchors as `storage` stores them and the residual code
// `spec` asks for, trained on `points` (train_coding); `coding` receives what was trained, the
// metadata its description. compress codes the points with it (encode_with_model), so a compressed
// file is what `train` then `encode` write.
VlatFile train_model(const PointView& points, const FitResult& result, const RunInput& input, AnchorStorage storage,
                  const CodingSpec& spec, Backend& backend, nlohmann::json metadata, TrainedCoding& coding);

// Encodes `points` against the anchors as `file` stores them (so rounded to float16 first under f16
// storage, as a reader will see them), and sets the codec. `widths` must not be empty.
void add_residual_codes(VlatFile& file, const Matrix& points, const std::vector<std::uint8_t>& widths);

// What the metadata records of the coding: the request, the candidates measured and the choice.
nlohmann::json coding_json(const CodingSpec& spec, const TrainedCoding& coding);

}  // namespace vlattice
