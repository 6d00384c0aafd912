// The Collective of processes started by mpirun (or srun), as a plugin the CLI loads only when it
// is started so (src/parallel/mpi_ranks.cpp): a build without MPI, or a run without mpirun, never
// needs the MPI libraries. Each exchange is one MPI_Allreduce (in pieces) on MPI_COMM_WORLD.
#include "vlattice/collective.hpp"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdio>

namespace {

class MpiCollective final : public vlattice::Collective {
public:
    MpiCollective() {
        MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
        MPI_Comm_size(MPI_COMM_WORLD, &size_);
    }
    ~MpiCollective() override { MPI_Finalize(); }

    int rank() const override { return rank_; }
    int size() const override { return size_; }
    void sum(std::int64_t* values, std::size_t count) override { reduce(values, count, MPI_INT64_T, MPI_SUM); }
    void sum(std::uint64_t* values, std::size_t count) override { reduce(values, count, MPI_UINT64_T, MPI_SUM); }
    void max(std::uint64_t* values, std::size_t count) override { reduce(values, count, MPI_UINT64_T, MPI_MAX); }
    void abandon(int code) override { MPI_Abort(MPI_COMM_WORLD, code); }

private:
    // MPI counts are ints: longer arrays go in pieces.
    template <class T>
    void reduce(T* values, std::size_t count, MPI_Datatype type, MPI_Op op) {
        for (std::size_t at = 0; at < count;) {
            const int piece = static_cast<int>(std::min<std::size_t>(count - at, INT_MAX / 2));
            if (MPI_Allreduce(MPI_IN_PLACE, values + at, piece, type, op, MPI_COMM_WORLD) != MPI_SUCCESS) {
                std::fprintf(stderr, "vlattice: rank %d: MPI_Allreduce failed\n", rank_);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
            at += static_cast<std::size_t>(piece);
        }
    }

    int rank_ = 0;
    int size_ = 1;
};

}  // namespace

// Starts MPI and returns the ranks, or null with the reason in `error`.
extern "C" vlattice::Collective* vlattice_mpi_ranks(char* error, std::size_t error_size) {
    if (MPI_Init(nullptr, nullptr) != MPI_SUCCESS) {
        std::snprintf(error, error_size, "MPI_Init failed");
        return nullptr;
    }
    return new MpiCollective();
}
