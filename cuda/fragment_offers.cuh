// The tensor-core assign kernels' epilogue: a finished wgmma fragment offered to the points' lists.
#pragma once

#include "candidate.cuh"
#include "wgmma.cuh"

#include <cuda/atomic>
#include <math_constants.h>

#include <cstddef>
#include <cstdint>

namespace vlattice::cuda {

// Offers owned row o of a finished fragment to `top`. The accumulators hold (||c||^2 - 2 x.c) /
// -scale_back with scale_back a power of two, so the largest is the least value, and scale_back
// times it is exact. A value at or above best + window (the repair's window for the row at its
// widest) is outside the window of the row's final best: it can neither join the repair's short
// list nor change whether more anchors than the list holds are inside the window, so the list skips
// it. `shared_bound` (as ordered_bits) is the least such limit any list of the row has published: a
// row then costs one comparison per tile once its lists have settled.
__device__ __forceinline__ void offer_fragment_row(const float (&acc)[kAccumulators], int o, float scale_back,
                                                   std::size_t first_col, float window, unsigned* shared_bound,
                                                   Candidate& top) {
    auto held = [&](int e) { return acc[(e / 2) * 4 + o * 2 + e % 2]; };
    float largest = held(0);
#pragma unroll
    for (int e = 1; e < kOwnedValues; ++e) {
        largest = fmaxf(largest, held(e));
    }
    // Other lanes may lower the shared bound meanwhile (atomically): a read that misses that only
    // sees a larger bound, which is still one.
    const unsigned published =
        ::cuda::atomic_ref<unsigned, ::cuda::thread_scope_block>(*shared_bound).load(::cuda::memory_order_relaxed);
    const float least = scale_back * largest;
    const float shared = from_ordered_bits(published);
    float bound = fminf(shared, fminf(top.next, top.dist[0] + window));
    if (!(least < bound)) {
        return;
    }
    // The row's final best is at most the tile's least value, so values at or above least + window
    // are outside its window too: without this, a row's first tile offered all its values.
    bound = fminf(bound, fmaxf(least + window, nextafterf(least, CUDART_INF_F)));
    // The values below the bound as bits, then offered one at a time, each picked out by selects:
    // an offer inlined per value made the kernel larger than the instruction cache (ncu: most
    // stalls waiting for instructions).
    unsigned below = 0;
#pragma unroll
    for (int e = 0; e < kOwnedValues; ++e) {
        below |= (scale_back * held(e) < bound ? 1u : 0u) << e;
    }
    while (below != 0) {
        const int k = __ffs(static_cast<int>(below)) - 1;
        below &= below - 1;
        float value = held(0);
#pragma unroll
        for (int e = 1; e < kOwnedValues; ++e) {
            value = e == k ? held(e) : value;
        }
        offer(scale_back * value, static_cast<std::uint32_t>(first_col + (k / 2) * 8 + k % 2), top);
    }
    const float limit = fminf(top.next, top.dist[0] + window);
    if (limit < shared) {
        atomicMin(shared_bound, ordered_bits(limit));
    }
}

}  // namespace vlattice::cuda
