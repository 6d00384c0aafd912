// A point's nearest anchors by fast (float) distance: what the fast assign kernels leave per point
// for the exact repair, and the device functions that build and combine them.
#pragma once

#include "math/warp_math.cuh"

#include <cuda_runtime.h>

#include <cstdint>

namespace vlattice::cuda {

// How many of the smallest fast distances a point keeps with their anchors.
constexpr int kKeep = 4;

// One point's kKeep smallest fast distances over a range of anchors, ordered by (distance, anchor),
// and the next smallest distance after them. The distances leave out the point's own squared norm,
// the same for every anchor: ||c||^2 - 2 x.c; the repair adds it back, and since rounding is
// monotonic the order is the same as that of the whole distances.
struct Candidate {
    float dist[kKeep];
    std::uint32_t id[kKeep];
    float next;
};

constexpr std::uint32_t kNoAnchor = 0xffffffffu;

__device__ __forceinline__ Candidate empty_candidate() {
    Candidate c;
#pragma unroll
    for (int s = 0; s < kKeep; ++s) {
        c.dist[s] = __int_as_float(0x7f800000);
        c.id[s] = kNoAnchor;
    }
    c.next = __int_as_float(0x7f800000);
    return c;
}

__device__ __forceinline__ bool before(float dist, std::uint32_t j, float other, std::uint32_t other_j) {
    return dist < other || (dist == other && j < other_j);
}

// Inserts (dist, j) in order, so ties go to the lowest anchor; what falls off the end lowers `next`.
// A distance no smaller than `next` changes nothing the repair reads: at most which of several equal
// distances is kept, and equal distances within the bound send the point to the all-anchor
// re-score anyway. Most offers stop at that one comparison.
__device__ __forceinline__ void offer(float dist, std::uint32_t j, Candidate& c) {
    if (!(dist < c.next)) {
        return;
    }
#pragma unroll
    for (int s = 0; s < kKeep; ++s) {
        if (before(dist, j, c.dist[s], c.id[s])) {
            const float moved = c.dist[s];
            const std::uint32_t moved_j = c.id[s];
            c.dist[s] = dist;
            c.id[s] = j;
            dist = moved;
            j = moved_j;
        }
    }
    c.next = fminf(c.next, dist);
}

// Offers a row's values value(e) with their anchors id(e), e < kCount, that lie below `bound`, after
// one test of their minimum: once the lists have settled, most tiles change nothing and cost one
// comparison per row instead of per value. `bound` may be the least `next` of any list that covers
// other anchors of the same row (see RowBound): a value at or above it can never reach the row's
// final kKeep, nor lower its final `next`, since that list keeps a `next` at most `bound`.
template <int kCount, class Value, class Id>
__device__ __forceinline__ void offer_below(float bound, const Value& value, const Id& id, Candidate& c) {
    bound = fminf(bound, c.next);
    float least = value(0);
#pragma unroll
    for (int e = 1; e < kCount; ++e) {
        least = fminf(least, value(e));
    }
    if (least < bound) {
#pragma unroll
        for (int e = 0; e < kCount; ++e) {
            if (value(e) < bound) {
                offer(value(e), id(e), c);
            }
        }
    }
}

// The two lists cover disjoint anchors: what either left out is no smaller than its `next`.
__device__ __forceinline__ void merge(Candidate& into, const Candidate& other) {
#pragma unroll
    for (int s = 0; s < kKeep; ++s) {
        offer(other.dist[s], other.id[s], into);
    }
    into.next = fminf(into.next, other.next);
}

// Merges the lists of the lanes whose ids differ in the bits of `mask` (a power of two and below).
__device__ __forceinline__ void merge_lanes(Candidate& mine, int mask) {
    for (int offset = mask; offset > 0; offset /= 2) {
        Candidate other;
#pragma unroll
        for (int s = 0; s < kKeep; ++s) {
            other.dist[s] = __shfl_xor_sync(kFullMask, mine.dist[s], offset);
            other.id[s] = __shfl_xor_sync(kFullMask, mine.id[s], offset);
        }
        other.next = __shfl_xor_sync(kFullMask, mine.next, offset);
        merge(mine, other);
    }
}

}  // namespace vlattice::cuda
