// OUTDIR/summary.json and summary.csv of `vlattice batch`: one row per job, in job order.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace vlattice::cli {

// Rewrites both files whole, each under a temporary name renamed into place, so that a batch killed
// after any job still leaves a valid summary of the jobs it finished. A value a row lacks (a failed
// job's m, the recall of an input with no test queries) is an empty CSV field.
void write_summary(const std::string& folder, const nlohmann::json& rows);

}  // namespace vlattice::cli
