// Whether a finished job's outputs can stand for running it again. `vlattice batch` skips a job only
// when its outputs verify and were made from the same input bytes with the same options; otherwise
// it runs the job again and says why. What the outputs were made from is recorded in the results
// file's `config` attribute under "made_from": the input's and the .vlat's size and hash, and the
// options (docs/batch.md).
#pragma once

#include "batch_jobs.hpp"

#include "vlattice/file_fingerprint.hpp"
#include "vlattice/types.hpp"

#include <nlohmann/json.hpp>

#include <string>

namespace vlattice::cli {

// The settings of `job` that decide its result: its anneal config as asked (M before a budget lowers
// it), the metric, the dataset for an HDF5 input, and the residual coding. What changes only how the
// result is computed (--device, --gpu, --threads, --validate-every) is left out.
nlohmann::json job_options(const Job& job, Metric metric, const po::variables_map& values, const CodingArgs& coding);

// The "made_from" record of a job's results file.
nlohmann::json made_from(const FileFingerprint& input, const nlohmann::json& options, const FileFingerprint& vlat);

struct Reuse {
    bool reuse = false;
    std::string redo_reason;  // why the job runs again; empty when it reuses its outputs or has none yet
};

// `input`: the job's input as it is now; `options`: job_options of this run.
Reuse check_finished_job(const JobOutputs& out, const FileFingerprint& input, const nlohmann::json& options);

}  // namespace vlattice::cli
