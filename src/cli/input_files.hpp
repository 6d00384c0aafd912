// Before any work, every file a command line names as an input is checked the way the readers check
// it, so that a missing, empty or irregular one (a folder, a named pipe) fails at once, naming it,
// rather than after a long read of another input, or after notes about the run.
#pragma once

#include "options.hpp"

#include <vector>

namespace vlattice::cli {

// vlattice::check_input_file for each path (empty paths are options not given); Error naming the first
// that is not a regular, non-empty file.
void check_inputs(const std::vector<NamedPath>& inputs);

}  // namespace vlattice::cli
