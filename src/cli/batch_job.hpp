// One job of `vlattice batch`: fit, evaluate, and write its two outputs as one.
#pragma once

#include "batch_jobs.hpp"

#include "vlattice/file_fingerprint.hpp"
#include "vlattice/types.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>

namespace vlattice::cli {

// What the command settled for a job before running it.
struct JobPlan {
    std::size_t index = 0;  // of `count` jobs, for the messages
    std::size_t count = 0;
    Metric metric = Metric::l2;
    FileFingerprint input;  // the input's bytes as they were before the run, recorded in the results file
    nlohmann::json options;  // batch_resume.hpp's job_options, recorded in the results file
    JobOutputs outputs;
};

// Loads the input (any format compress reads) and, when it is an HDF5 file with `test` and
// `neighbors`, checks those against it before the fit, so that a mismatch fails the job before the
// hours of work rather than after. Fits, measures 10-recall@10 when there are test queries, and
// writes the .vlat and the results file under temporary names, renamed into place together only
// when the whole job succeeded. Returns the job's summary row; throws on failure, leaving any
// earlier outputs of the job as they were.
nlohmann::json run_job(const Job& job, const JobPlan& plan, const BatchArgs& args, const po::variables_map& values);

}  // namespace vlattice::cli
