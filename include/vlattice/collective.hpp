// What the processes of one fit exchange, whatever carries it. Each of R ranks holds a contiguous
// range of the rows; every call is made by every rank in the same order, with arrays of the same
// length, and leaves every rank the same result. Only integer sums and maxima go through it: they
// give the same bits in any order, which is what makes a fit on R ranks the fit of one process
// (and a gather, for outputs that rank 0 writes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace vlattice {

class Collective {
public:
    virtual ~Collective() = default;
    virtual int rank() const = 0;
    virtual int size() const = 0;
    // values[i] <- the sum (or the largest) of values[i] over the ranks.
    virtual void sum(std::int64_t* values, std::size_t count) = 0;
    virtual void sum(std::uint64_t* values, std::size_t count) = 0;
    virtual void max(std::uint64_t* values, std::size_t count) = 0;
    // Every rank's `bytes` bytes from `mine`, in rank order, into `all` on rank 0, which has room for
    // `capacity` bytes (ignored on the others): what only rank 0 needs goes to it alone. Ranks whose
    // bytes do not add up to the capacity end the run.
    virtual void gather_to_first(const void* mine, std::uint64_t bytes, void* all, std::uint64_t capacity) = 0;
    // After an error on this rank, ends the run of every rank with `code` (MPI_Abort), so that none
    // waits on an exchange this one will not make. One process just returns.
    virtual void abandon(int code) { (void)code; }
};

// The one rank of a fit run in a single process: every exchange leaves the values as they are.
Collective& single_process();

// This rank's rows are first_row .. first_row + its count of the total_rows of the set.
struct RowShare {
    Collective* ranks = &single_process();
    std::uint64_t first_row = 0;
    std::uint64_t total_rows = 0;
};

// The share of one process holding all n rows.
inline RowShare whole_set(std::size_t n) { return {&single_process(), 0, n}; }

// Rank r's rows of n split over `size` ranks: contiguous, in row order, and starting on a block of
// the deterministic sums (1,024 rows), so that each rank's block sums are the whole set's.
struct RowRange {
    std::uint64_t first = 0;
    std::uint64_t count = 0;
};
RowRange rank_rows(std::uint64_t n, int size, int rank);

// Values that one rank at most holds non-zero, each slot, onto every rank: an integer sum of
// their bits over the ranks, which adds nothing but zeros to each.
void share_values(Collective& ranks, float* values, std::size_t count);
void share_values(Collective& ranks, double* values, std::size_t count);
void share_values(Collective& ranks, std::uint32_t* values, std::size_t count);

// Every rank's text, in rank order, onto every rank (the same sum of bits, each rank's bytes in
// a stretch of their own).
std::vector<std::string> gather_texts(Collective& ranks, const std::string& mine);

// Whether the environment says mpirun or srun started this process (Open MPI's, PMI's or PMIx's
// variables).
bool started_by_mpi();
// This process's rank among those of its host, and how many ranks its host runs, as mpirun or srun
// tell them (0 and 1 where they do not).
int local_rank();
int local_size();
// The ranks of such a process, through the MPI plugin (libvlattice_mpi.so, built where MPI is
// found; VLATTICE_MPI_PLUGIN, else beside the executable or in the installed lib/vlattice), which
// starts MPI: a process started otherwise needs neither. Throws Error naming the plugin and the
// reason where it cannot. Once per process: the Collective's end finalises MPI.
std::unique_ptr<Collective> start_mpi_ranks();

}  // namespace vlattice
