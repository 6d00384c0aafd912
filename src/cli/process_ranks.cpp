#include "process_ranks.hpp"

#include "vlattice/device.hpp"

#include <algorithm>
#include <memory>
#include <thread>

namespace vlattice::cli {

namespace {

std::unique_ptr<Collective>& ranks() {
    static std::unique_ptr<Collective> started;
    return started;
}

}  // namespace

void start_process_ranks() {
    if (started_by_mpi() && !ranks()) {
        ranks() = start_mpi_ranks();
    }
}

Collective* process_ranks() { return ranks().get(); }

int rank_gpu(int gpu, bool defaulted) {
    if (!process_ranks() || !defaulted) {
        return gpu;
    }
    const int gpus = gpu_count();
    return gpus > 0 ? local_rank() % gpus : gpu;
}

int rank_threads(int threads) {
    if (!process_ranks() || threads != 0) {
        return threads;
    }
    const unsigned cores = std::thread::hardware_concurrency();
    return std::max(1, static_cast<int>(cores) / local_size());
}

}  // namespace vlattice::cli
