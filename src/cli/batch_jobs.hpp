// What `vlattice batch` runs: its arguments, and the list of jobs they and a manifest name, each
// checked before the first one runs.
#pragma once

#include "anneal_options.hpp"
#include "coding_options.hpp"
#include "options.hpp"

#include <optional>
#include <string>
#include <vector>

namespace vlattice::cli {

struct BatchArgs {
    AnnealArgs anneal;
    CodingArgs coding;
    std::vector<std::string> files;
    std::string manifest;
    std::string output;
    std::string device;
    long long train_sample = 0;  // rows each job trains on (0: all)
    bool force = false;
    bool quiet = false;
};

struct Job {
    std::string name;
    std::string file;
    AnnealArgs anneal;  // the command's, with the manifest's anchors, metric and dataset; checked by collect_jobs
    std::string device;
    std::optional<unsigned> bits;  // from a manifest; else the options decide
};

// The FILEs, then the manifest's jobs. `budget`: --target-bytes or --target-ratio was given. Every
// job's settings are checked here, once (check_anneal_args also fills in each job's config), so
// that a mistake in the last one does not show only after hours of the others. Throws UsageError.
std::vector<Job> collect_jobs(const BatchArgs& args, bool budget);

struct JobOutputs {
    std::string vlat;
    std::string results;
};

JobOutputs outputs_of(const std::string& folder, const Job& job);

}  // namespace vlattice::cli
