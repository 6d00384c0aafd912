// The Collective of processes started by mpirun (or srun), as a plugin the CLI loads only when it
// is started so (src/parallel/mpi_ranks.cpp): a build without MPI, or a run without mpirun, never
// needs the MPI libraries. Each exchange is one MPI_Allreduce (in pieces) on MPI_COMM_WORLD; a
// gather to rank 0 is point-to-point.
#include "vlattice/collective.hpp"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <vector>

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

    // Rank 0 learns every rank's length, then takes each rank's bytes in turn, in pieces that an
    // int counts.
    void gather_to_first(const void* mine, std::uint64_t bytes, void* all, std::uint64_t capacity) override {
        std::vector<std::uint64_t> lengths(rank_ == 0 ? static_cast<std::size_t>(size_) : 1);
        check(MPI_Gather(&bytes, 1, MPI_UINT64_T, lengths.data(), 1, MPI_UINT64_T, 0, MPI_COMM_WORLD), "MPI_Gather");
        if (rank_ != 0) {
            const char* from = static_cast<const char*>(mine);
            for (std::uint64_t at = 0; at < bytes;) {
                const int piece = static_cast<int>(std::min<std::uint64_t>(bytes - at, INT_MAX));
                check(MPI_Send(from + at, piece, MPI_BYTE, 0, 0, MPI_COMM_WORLD), "MPI_Send");
                at += static_cast<std::uint64_t>(piece);
            }
            return;
        }
        std::uint64_t total = 0;
        for (const std::uint64_t length : lengths) {
            total += length;
        }
        if (total != capacity) {
            std::fprintf(stderr, "vlattice: rank 0: the ranks gather %llu bytes into room for %llu\n",
                         static_cast<unsigned long long>(total), static_cast<unsigned long long>(capacity));
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        char* to = static_cast<char*>(all);
        if (bytes > 0) {
            std::memcpy(to, mine, bytes);
        }
        to += bytes;
        for (int r = 1; r < size_; ++r) {
            for (std::uint64_t at = 0; at < lengths[static_cast<std::size_t>(r)];) {
                const int piece = static_cast<int>(std::min<std::uint64_t>(lengths[static_cast<std::size_t>(r)] - at, INT_MAX));
                check(MPI_Recv(to, piece, MPI_BYTE, r, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
                to += piece;
                at += static_cast<std::uint64_t>(piece);
            }
        }
    }

private:
    // MPI counts are ints: longer arrays go in pieces.
    template <class T>
    void reduce(T* values, std::size_t count, MPI_Datatype type, MPI_Op op) {
        for (std::size_t at = 0; at < count;) {
            const int piece = static_cast<int>(std::min<std::size_t>(count - at, INT_MAX / 2));
            check(MPI_Allreduce(MPI_IN_PLACE, values + at, piece, type, op, MPI_COMM_WORLD), "MPI_Allreduce");
            at += static_cast<std::size_t>(piece);
        }
    }

    // MPI's default handler aborts on errors already; a handler that returns them ends the run too.
    void check(int status, const char* call) const {
        if (status != MPI_SUCCESS) {
            std::fprintf(stderr, "vlattice: rank %d: %s failed\n", rank_, call);
            MPI_Abort(MPI_COMM_WORLD, 1);
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
