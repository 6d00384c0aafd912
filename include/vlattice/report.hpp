// The run report (`compress --report FILE.json`): everything about one run, timings included. Unlike
// the .vlat metadata it is not meant to be reproducible, only complete.
#pragma once

#include "vlattice/anneal.hpp"
#include "vlattice/coding_plan.hpp"
#include "vlattice/config.hpp"
#include "vlattice/pipeline.hpp"
#include "vlattice/stage_seconds.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

namespace vlattice {

// What the run report needs beyond the config and the fit result.
struct ReportContext {
    RunInput input;
    std::string backend;  // Backend::name()
    int threads = 0;      // as requested; 0 is reported as the number of threads actually available
    double load_seconds = 0.0;
    // Under a whole-file budget, the fits of the anchor counts tried and not kept.
    double other_fits_seconds = 0.0;
    double code_seconds = 0.0;  // training the residual code and coding the vectors
    StageSeconds code_training;  // the parts of code_seconds (TrainedCoding::seconds)
    StageSeconds code_coding;    // (encode_with_model's seconds)
    // Every budget candidate of every anchor count tried, with that count: its seconds.
    std::vector<std::pair<std::size_t, CodingCandidate>> code_candidates;
    double write_seconds = 0.0;
};

nlohmann::json iteration_json(const IterationRecord& record);

// The keys of run_metadata (with the full input path and config.threads), plus backend,
// points_placement (where the backend says where it put the points), threads,
// history[] (one iteration_json per iteration) and seconds{load, init (with its part init_upload), assign, reduce, update,
// maintenance (with its parts maintenance_nearest and maintenance_members), energy, code, write,
// fit, other_fits, total} and code_seconds{training{stage: s}, coding{stage: s}}, the parts of seconds.code,
// with candidates[{anchors, code, seconds{stage: s, wall}}].
nlohmann::json run_report(const AnnealConfig& config, const FitResult& result, const ReportContext& context);

}  // namespace vlattice
