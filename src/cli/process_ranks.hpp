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

// Under ranks, what a rank takes where the options are left at their defaults, so that the ranks
// of one host share it out: the local rank's GPU (modulo the GPUs present), and the host's cores
// divided among its ranks (`threads` 0, all cores). Given values, and a single process, keep theirs.
int rank_gpu(int gpu, bool defaulted);
int rank_threads(int threads);

}  // namespace vlattice::cli
