// What the processes of one fit exchange, whatever carries it. Each of R ranks holds a contiguous
// range of the rows; every call is made by every rank in the same order, with arrays of the same
// length, and leaves every rank the same result. Only integer sums and maxima go through it: they
// give the same bits in any order, which is what makes a fit on R ranks the fit of one process.
#pragma once

#include <cstddef>
#include <cstdint>

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

}  // namespace vlattice
