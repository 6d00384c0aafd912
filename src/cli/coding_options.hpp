// The residual-coding options compress, train and batch share: --bits, --target-bytes,
// --target-ratio, --target-file-bytes, --target-file-ratio, --codec and the product code's --subspaces, --stages, --pq-bits, --opq-iters,
// --opq-min-gain.
#pragma once

#include "options.hpp"

#include "vlattice/coding_plan.hpp"
#include "vlattice/config.hpp"
#include "vlattice/format.hpp"
#include "vlattice/pipeline.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace vlattice::cli {

struct CodingArgs {
    long long bits = 0;  // signed, so that --bits -1 is reported rather than wrapped
    double target_bytes = 0.0;
    std::string target_ratio;
    double target_file_bytes = 0.0;
    std::string target_file_ratio;
    std::string codec = "auto";
    long long subspaces = 0;
    long long stages = 0;
    long long pq_bits = 8;
    long long opq_iters = ProductCodeConfig{}.opq_iters;
    double opq_min_gain = ProductCodeConfig{}.opq_min_gain;
};

void add_coding_options(po::options_description& options, CodingArgs& args);

// Throws UsageError for a width other than 0, 2, 4, 8, for --bits together with a target, for more
// than one target, for a ratio outside (0, 1] (written 0.125 or 12.5%), for an unknown --codec, for --bits
// with --codec pq or rq, for --codec pq without --subspaces or a budget, for --codec rq without
// --stages or a budget, and for --subspaces or --stages with a budget; the parser has already
// refused widths outside [0, 8] and byte budgets that are not a finite number > 0.
// Commands call it before they read any input, so that a mistake shows before the work.
void check_coding_args(const po::variables_map& values, const CodingArgs& args);

// Whether a budget was given (--target-bytes, --target-ratio, --target-file-bytes or
// --target-file-ratio), which chooses the widths.
bool budget_given(const po::variables_map& values);

// The request once the dimension d is known (a ratio is of 4 d bytes), from arguments that
// check_coding_args has passed; `config` gives the product code's k-means its seed and threads.
CodingSpec coding_spec(const po::variables_map& values, const CodingArgs& args, std::size_t d,
                       const AnnealConfig& config);

// When the budget is more than the best coding takes (8-bit codes in every dimension beside the ids
// of m anchors), which it then gets: a note saying so for the user; else empty.
std::string budget_note(const CodingSpec& spec, std::size_t n, std::size_t m, std::size_t d);

// "m = 1024 (10-bit ids), residuals 776 x 4 bits, 8 x 0 bits" or "m = 1024 (10-bit ids), product
// code M = 30 x 8 bits over 784 rotated dimensions": what a run chose, for the user.
std::string describe_coding(const VlatFile& file);

// The candidates a budget measured, one line each, the chosen one marked; empty without a budget.
std::string describe_candidates(const TrainedCoding& coding);

// describe_candidates for every anchor count a run tried, each under a line naming its count.
std::string describe_trials(const TrainedRun& run);

// "256, 64 and 16".
std::string describe_counts(const std::vector<std::size_t>& counts);

}  // namespace vlattice::cli
