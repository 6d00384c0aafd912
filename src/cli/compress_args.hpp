// compress's and train's command line, and compress over the ranks that mpirun or srun started.
#pragma once

#include "anneal_options.hpp"
#include "coding_options.hpp"
#include "options.hpp"

#include "vlattice/collective.hpp"

#include <string>

namespace vlattice::cli {

struct CompressArgs {
    AnnealArgs anneal;
    CodingArgs coding;
    std::string input;
    std::string output;
    std::string device;
    std::string anchor_storage;
    std::string report;
    std::string anchors_from;
    long long train_sample = 0;
    bool quiet = false;
};

// compress with each rank reading its own rows (rank_rows) and fitting them with the others on the
// CPU: rank 0 writes the file one process would have written. Anchors and ids only, for now: the
// options a run over ranks cannot honour yet are refused, naming them.
int compress_on_ranks(const CommandHelp& help, CompressArgs& args, const po::variables_map& values,
                      Collective& ranks);

}  // namespace vlattice::cli
