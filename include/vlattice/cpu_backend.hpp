#pragma once

#include "vlattice/backend.hpp"

#include <memory>
#include <string>

namespace vlattice {

// The CPU threads a run gets, and why, when that is fewer than asked for.
struct CpuThreads {
    int threads = 1;
    std::string note;  // one line for the user when the count was lowered, else empty
};

// `requested` threads (0: OpenMP's default, every core unless OMP_NUM_THREADS says otherwise), at
// most the cores this process may run on (more only take turns on them), and at most as many as
// the address-space limit (ulimit -v) leaves room for: OpenBLAS maps a large buffer for every thread
// and, in the versions Debian and Ubuntu ship, retries a failed mapping forever instead of failing.
// Never fewer than 1.
CpuThreads plan_cpu_threads(int requested);

// BLAS GEMM in blocks for the distances, OpenMP for everything per point and per anchor, on
// plan_cpu_threads(threads) threads (OpenMP's and OpenBLAS's count are both set to it).
// threads = 0 uses every core.
std::unique_ptr<Backend> make_cpu_backend(int threads = 0);
// The same for this rank's share of the rows: every call that reads the points gives the result
// one process holding all of them would (robust_reduce, energies, k-means++, member gathers).
std::unique_ptr<Backend> make_cpu_backend(int threads, const RowShare& share);

}  // namespace vlattice
