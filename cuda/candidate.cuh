// A point's nearest anchors by fast (float) distance: what the fast assign kernels leave per point
// for the exact repair, and the device functions that build and combine them.
#pragma once

#include "warp_math.cuh"

#include <cuda_runtime.h>

#include <cstdint>

namespace vlattice::cuda {

// One point's three smallest fast distances over a range of anchors, ordered by (distance, anchor),
// with the anchors of the first two.
struct Candidate {
    float best;
    float second;
    float third;
    std::uint32_t best_j;
    std::uint32_t second_j;
};

__device__ __forceinline__ Candidate empty_candidate() {
    return Candidate{__int_as_float(0x7f800000), __int_as_float(0x7f800000), __int_as_float(0x7f800000), 0, 0};
}

// Keeps the two smallest (distance, anchor) pairs in order, so ties go to the lowest anchor, and the
// third smallest distance. A distance no smaller than the third changes nothing the repair reads:
// the only thing it could change is which of two equal distances is kept, and equal distances
// within the bound send the point to the all-anchor re-score anyway. Most offers stop at that test.
__device__ __forceinline__ void offer(float dist, std::uint32_t j, Candidate& c) {
    if (!(dist < c.third)) {
        return;
    }
    if (dist < c.best || (dist == c.best && j < c.best_j)) {
        c.third = c.second;
        c.second = c.best;
        c.second_j = c.best_j;
        c.best = dist;
        c.best_j = j;
    } else if (dist < c.second || (dist == c.second && j < c.second_j)) {
        c.third = c.second;
        c.second = dist;
        c.second_j = j;
    } else {
        c.third = dist;
    }
}

// The two lists cover disjoint anchors. Whatever other.third displaces, other.best and other.second
// (no larger) have displaced first, so it can only lower the third distance.
__device__ __forceinline__ void merge(Candidate& into, const Candidate& other) {
    offer(other.best, other.best_j, into);
    offer(other.second, other.second_j, into);
    into.third = fminf(into.third, other.third);
}

// Merges the lists of the lanes whose ids differ in the bits of `mask` (a power of two and below).
__device__ __forceinline__ void merge_lanes(Candidate& mine, int mask) {
    for (int offset = mask; offset > 0; offset /= 2) {
        const Candidate other{__shfl_xor_sync(kFullMask, mine.best, offset),
                              __shfl_xor_sync(kFullMask, mine.second, offset),
                              __shfl_xor_sync(kFullMask, mine.third, offset),
                              __shfl_xor_sync(kFullMask, mine.best_j, offset),
                              __shfl_xor_sync(kFullMask, mine.second_j, offset)};
        merge(mine, other);
    }
}

}  // namespace vlattice::cuda
