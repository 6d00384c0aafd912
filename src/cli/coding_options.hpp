// The residual-coding options compress and batch share: --bits, --target-bytes, --target-ratio.
#pragma once

#include "options.hpp"

#include "vlattice/pipeline.hpp"

#include <cstddef>
#include <string>

namespace vlattice::cli {

struct CodingArgs {
    long long bits = 0;  // signed, so that --bits -1 is reported rather than wrapped
    double target_bytes = 0.0;
    std::string target_ratio;
};

void add_coding_options(po::options_description& options, CodingArgs& args);

// Throws UsageError for a width other than 0, 2, 4, 8, for --bits together with a target, for both
// targets, and for a ratio outside (0, 1] (written 0.125 or 12.5%); the parser has already refused
// widths outside [0, 8] and byte budgets that are not a finite number > 0.
// Commands call it before they read any input, so that a mistake shows before the work.
void check_coding_args(const po::variables_map& values, const CodingArgs& args);

// Whether --target-bytes or --target-ratio was given: a budget, which chooses the widths.
bool budget_given(const po::variables_map& values);

// The request once the dimension d is known (a ratio is of 4 d bytes), from arguments that
// check_coding_args has passed.
CodingRequest coding_request(const po::variables_map& values, const CodingArgs& args, std::size_t d);

// When the budget is more than the best coding takes (8-bit codes in every dimension beside the ids
// of m anchors), which it then gets: a note saying so for the user; else empty.
std::string budget_note(const CodingRequest& request, std::size_t n, std::size_t m, std::size_t d);

// "m = 1024 (10-bit ids), residuals 776 x 4 bits, 8 x 0 bits": what a run chose, for the user.
std::string describe_coding(std::size_t m, const std::vector<std::uint8_t>& widths);

}  // namespace vlattice::cli
