// The ranks of this process, where mpirun or srun started it: set up once by main, before any
// command runs, and ended (MPI finalised) when the process exits.
#pragma once

#include "vlattice/collective.hpp"

namespace vlattice::cli {

// Starts MPI through its plugin when the environment says mpirun or srun started the process;
// throws Error where it cannot.
void start_process_ranks();
// The ranks, or null for a process started on its own.
Collective* process_ranks();

}  // namespace vlattice::cli
