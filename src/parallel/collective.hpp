// What the processes of one fit exchange, whatever carries it. Each of R ranks holds a contiguous
// range of the rows; every call is made by every rank in the same order, with arrays of the same
// length, and leaves every rank the same result. Only integer sums and maxima go through it: they
// give the same bits in any order, which is what makes a fit on R ranks the fit of one process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

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
};

// The one rank of a fit run in a single process: every exchange leaves the values as they are.
Collective& single_process();

}  // namespace vlattice
