// The tensor-core assign kernels' epilogue: a finished wgmma fragment offered to the points' lists.
#pragma once

#include "assign/candidate.cuh"
#include "math/wgmma.cuh"

#include <cuda/atomic>
#include <math_constants.h>

#include <cstddef>
#include <cstdint>

namespace vlattice::cuda {

// Offers owned row o of a finished fragment of values (||c||^2 - 2 x.c, as Candidate holds them) to
// `top`. A value at or above best + window(best) is outside the window of the row's final best (the
// window grows with the best, which only falls): it can neither join the repair's short list nor
// change whether more anchors than the list holds are inside the window, so the list skips it.
// `limit` caches the row's min(next, best + window(best)) between tiles; `shared_bound` (as
// ordered_bits) is the least such limit any list of the row has published: a row then costs one
// comparison per tile once its lists have settled.
template <class Window>
__device__ __forceinline__ void offer_fragment_row(const float (&values)[kAccumulators], int o, std::size_t first_col,
                                                   const Window& window, float& limit, unsigned* shared_bound,
                                                   Candidate& top) {
    auto value = [&](int e) { return values[(e / 2) * 4 + o * 2 + e % 2]; };
    float least = value(0);
#pragma unroll
    for (int e = 1; e < kOwnedValues; ++e) {
        least = fminf(least, value(e));
    }
    // Other lanes may lower the shared bound meanwhile (atomically): a read that misses that only
    // sees a larger bound, which is still one.
    const unsigned published =
        ::cuda::atomic_ref<unsigned, ::cuda::thread_scope_block>(*shared_bound).load(::cuda::memory_order_relaxed);
    const float shared = from_ordered_bits(published);
    float bound = fminf(shared, limit);
    if (!(least < bound)) {
        return;
    }
    // The row's final best is at most the tile's least value, so values at or above least +
    // window(least) are outside its window too: without this, a row's first tile offered all its values.
    bound = fminf(bound, fmaxf(least + window(least), nextafterf(least, CUDART_INF_F)));
    // The values below the bound as bits, then offered one at a time, each picked out by selects:
    // an offer inlined per value made the kernel larger than the instruction cache (ncu: most
    // stalls waiting for instructions).
    unsigned below = 0;
#pragma unroll
    for (int e = 0; e < kOwnedValues; ++e) {
        below |= (value(e) < bound ? 1u : 0u) << e;
    }
    while (below != 0) {
        const int k = __ffs(static_cast<int>(below)) - 1;
        below &= below - 1;
        float picked = value(0);
#pragma unroll
        for (int e = 1; e < kOwnedValues; ++e) {
            picked = e == k ? value(e) : picked;
        }
        offer(picked, static_cast<std::uint32_t>(first_col + (k / 2) * 8 + k % 2), top);
    }
    limit = fminf(top.next, top.dist[0] + window(top.dist[0]));
    if (limit < shared) {
        atomicMin(shared_bound, ordered_bits(limit));
    }
}

// offer_fragment_row for every owned row of a thread's kHalves fragments; row_of(h, o) is the block
// row of half h's owned row o, whose shared bound is row_bound[row_of(h, o)].
template <int kHalves, class Window, class RowOf>
__device__ __forceinline__ void offer_fragments(const float (&values)[kHalves][kAccumulators], std::size_t first_col,
                                                const Window (&window)[kHalves][kOwnedRows],
                                                float (&limit)[kHalves][kOwnedRows], unsigned* row_bound,
                                                const RowOf& row_of, Candidate (&top)[kHalves][kOwnedRows]) {
#pragma unroll
    for (int h = 0; h < kHalves; ++h) {
#pragma unroll
        for (int o = 0; o < kOwnedRows; ++o) {
            offer_fragment_row(values[h], o, first_col, window[h][o], limit[h][o], &row_bound[row_of(h, o)], top[h][o]);
        }
    }
}

// The split kernels' window: the same for every best of a row.
struct FixedWindow {
    float width = 0.0f;
    __device__ __forceinline__ float operator()(float) const { return width; }
};

}  // namespace vlattice::cuda
