#include "process_ranks.hpp"

#include <memory>

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

}  // namespace vlattice::cli
