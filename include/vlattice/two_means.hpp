// The 2-means that splits an anchor in maintenance, on a sample of its members. Every backend's
// split_members gives the CPU's results here bit for bit (the CUDA backend runs it on the device, so
// that the members never cross the bus).
#pragma once

#include "vlattice/types.hpp"

#include <cstddef>
#include <vector>

namespace vlattice {

// How many Lloyd steps follow the seeding.
constexpr int kTwoMeansSteps = 6;

struct MemberSplit {
    bool ok = false;  // false: fewer than two members, or all of them one point
    std::vector<float> left, right;
    double before = 0.0;  // the members' squared distances to their mean, summed
    double after = 0.0;   // to the nearer of left and right
    std::size_t rows = 0;
};

// Deterministic 2-means of the rows of `members`: seeded with the member farthest from the mean and
// the member farthest from that one (first on ties), then up to kTwoMeansSteps Lloyd steps, stopping
// early once no member changes side. Distances are ordered_squared_distance's (float, in a fixed
// order); sums over members run in member order, in double.
MemberSplit split_in_two(const Matrix& members);

// split_in_two of each matrix, in parallel where the work pays for waking the threads; the results
// do not depend on the thread count.
std::vector<MemberSplit> split_each(const std::vector<Matrix>& members);

}  // namespace vlattice
