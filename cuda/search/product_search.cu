#include "search/product_search.cuh"

#include "runtime/cuda_check.hpp"
#include "runtime/launch.hpp"
#include "runtime/shared_memory.hpp"
#include "search/search_device.cuh"

#include <algorithm>

namespace vlattice::cuda {

namespace {

// Candidates a block of product_keys_kernel scores per turn.
constexpr std::size_t kTile = 4096;
// The most turns a query's candidates are spread over at once (the grid's y limit).
constexpr std::size_t kMaxTiles = 65535;

// Rq[t] = sum over k of R[t][k] * q[k], from 0 in k order: a thread per (query, t).
__global__ void rotate_kernel(const float* __restrict__ queries, std::size_t count, int d, ProductView view,
                              float* __restrict__ rotated) {
    const std::size_t e = thread_index();
    if (e >= count * view.p) {
        return;
    }
    const float* x = queries + e / view.p * d;
    const float* r = view.rotation + e % view.p * d;
    float sum = 0.0f;
    for (int k = 0; k < d; ++k) {
        sum = __fadd_rn(sum, __fmul_rn(r[k], x[k]));
    }
    rotated[e] = sum;
}

// Q_j[c] of the query whose rotation is rq.
__device__ float subspace_value(const ProductView& view, const float* __restrict__ rq, int j, unsigned c) {
    const float* z = code_centroid(view, j, c);
    const int sub = j % view.subspaces;
    float sum = 0.0f;
    for (unsigned t = view.bounds[sub]; t < view.bounds[sub + 1]; ++t) {
        sum = __fadd_rn(sum, __fmul_rn(z[t], rq[t]));
    }
    return sum;
}

// T_u[x]: a thread per (query, lookup u, index x).
__global__ void tables_kernel(const float* __restrict__ rotated, std::size_t count, ProductView view,
                              float* __restrict__ tables) {
    const std::size_t per_query = table_values(view);
    const std::size_t e = thread_index();
    if (e >= count * per_query) {
        return;
    }
    const float* rq = rotated + e / per_query * view.p;
    const auto values = static_cast<std::size_t>(view.unit_values);
    const int b = static_cast<int>(e % per_query / values);
    const auto x = static_cast<unsigned>(e % values);
    if (view.bits != 4) {
        tables[e] = subspace_value(view, rq, b, x);
        return;
    }
    const float low = subspace_value(view, rq, 2 * b, x & 0xfu);
    tables[e] = 2 * b + 1 < view.code_count ? __fadd_rn(low, subspace_value(view, rq, 2 * b + 1, x >> 4)) : low;
}

// A block per (query, tile of kTile of its candidates), the query's tables in shared memory when
// kShared (else read where they are); a thread per candidate, each probed list's members side by side.
template <bool kShared>
__global__ void product_keys_kernel(ProductPart part, ProductView view, const float* __restrict__ tables,
                                    bool inner_product, std::uint64_t* __restrict__ keys) {
    extern __shared__ float shared_tables[];
    const std::size_t q = part.first + blockIdx.x;
    const std::size_t per_query = table_values(view);
    const float* table = tables + q * per_query;
    if constexpr (kShared) {
        for (std::size_t e = threadIdx.x; e < per_query; e += blockDim.x) {
            shared_tables[e] = table[e];
        }
        __syncthreads();
        table = shared_tables;
    }
    const std::int64_t query_end = part.query_offsets[q + 1];
    const std::size_t first_slot = q * part.nprobe;
    const std::size_t end_slot = first_slot + part.nprobe;
    const auto tile = static_cast<std::int64_t>(kTile);
    for (std::int64_t lo = part.query_offsets[q] + blockIdx.y * tile; lo < query_end; lo += gridDim.y * tile) {
        const std::int64_t hi = min(lo + tile, query_end);
        // The slot of candidate lo: the last whose offset is <= lo (empty slots share their successor's).
        std::size_t s = first_slot;
        std::size_t above = end_slot;
        while (above - s > 1) {
            const std::size_t mid = s + (above - s) / 2;
            if (part.slot_offsets[mid] <= lo) {
                s = mid;
            } else {
                above = mid;
            }
        }
        for (; s < end_slot && part.slot_offsets[s] < hi; ++s) {
            const std::int64_t slot_begin = part.slot_offsets[s];
            const std::int64_t from = max(lo, slot_begin);
            const std::int64_t to = min(hi, part.slot_offsets[s + 1]);
            const std::uint64_t probe = part.probes[q * part.m + (s - first_slot)];
            const float probe_score = key_score(probe);
            const std::size_t list = part.start[key_id(probe)];
            for (std::int64_t c = from + threadIdx.x; c < to; c += blockDim.x) {
                const std::size_t position = list + static_cast<std::size_t>(c - slot_begin);
                const std::uint8_t* code = scan_code(view, position);
                float sum = 0.0f;
                for (int u = 0; u < view.unit_count; ++u) {
                    sum = __fadd_rn(sum, table[u * view.unit_values + scan_unit(view, code, u)]);
                }
                const float score = inner_product ? adc_ip_score(probe_score, sum)
                                                  : adc_l2_score(probe_score, view.extra[position], sum);
                keys[c - part.base] = sort_key(score, part.members[position]);
            }
        }
    }
}

// A half warp per (query, rank r < slots); the ranks past a query's keep or its candidates only take
// part in the shuffles, on vector 0 (the search has at least one vector).
__global__ void rerank_kernel(const std::uint64_t* __restrict__ sorted, const std::int64_t* __restrict__ segments,
                              std::size_t count, std::size_t keep, std::size_t slots, const float* __restrict__ queries,
                              const float* __restrict__ anchors, int d, ProductView view, bool inner_product,
                              std::uint64_t* __restrict__ rescored, std::int64_t* __restrict__ ends) {
    const std::size_t items = count * slots;
    const std::size_t h = half_warp_index();
    const int l = threadIdx.x % kDistanceLanes;
    const std::size_t item = h < items ? h : 0;
    const std::size_t q = item / slots;
    const auto r = static_cast<std::int64_t>(item % slots);
    const std::int64_t begin = segments[q];
    const std::int64_t taken = min(static_cast<std::int64_t>(keep), segments[q + 1] - begin);
    const bool valid = h < items && r < taken;
    const std::uint32_t id = valid ? key_id(sorted[begin + r]) : 0;
    const ProductRow row{anchors + static_cast<std::size_t>(view.assignments[id]) * d,
                         scan_code(view, view.positions[id]), view, d};
    const float value = exact_score(queries + q * d, row, d, l, inner_product);
    if (valid && l == 0) {
        rescored[begin + r] = sort_key(value, id);
    }
    if (h < items && r == 0 && l == 0) {
        ends[q] = begin + taken;
    }
}


}  // namespace

void product_query_tables(const ProductView& view, const float* queries, std::size_t count, int d, float* rotated,
                          float* tables, cudaStream_t stream) {
    const std::size_t rotations = count * static_cast<std::size_t>(view.p);
    rotate_kernel<<<blocks_for(rotations), kSearchThreads, 0, stream>>>(queries, count, d, view, rotated);
    check_launch("rotate_kernel", stream);
    const std::size_t entries = count * table_values(view);
    tables_kernel<<<blocks_for(entries), kSearchThreads, 0, stream>>>(rotated, count, view, tables);
    check_launch("tables_kernel", stream);
}

void product_keys(const ProductPart& part, const ProductView& view, const float* tables, bool inner_product,
                  std::uint64_t* keys, cudaStream_t stream) {
    int device = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    const std::size_t limit = block_shared_memory(device);
    const std::size_t table_bytes = table_values(view) * sizeof(float);
    const dim3 grid(static_cast<unsigned>(part.count),
                    static_cast<unsigned>(std::clamp<std::size_t>(ceil_div(part.widest, kTile), 1, kMaxTiles)));
    if (table_bytes <= limit) {
        launch_kernel_ex(product_keys_kernel<true>, "product_keys_kernel", grid, kSearchThreads, table_bytes, 1, stream,
                         part, view, tables, inner_product, keys);
    } else {
        launch_kernel_ex(product_keys_kernel<false>, "product_keys_kernel", grid, kSearchThreads, 0, 1, stream, part,
                         view, tables, inner_product, keys);
    }
}

void rerank_keys(const std::uint64_t* sorted, const std::int64_t* segments, std::size_t count, std::size_t keep,
                 std::size_t widest, const float* queries, const float* anchors, int d, const ProductView& view,
                 bool inner_product, std::uint64_t* rescored, std::int64_t* ends, cudaStream_t stream) {
    const std::size_t slots = std::max<std::size_t>(1, std::min(keep, widest));
    rerank_kernel<<<half_warp_blocks(count * slots), kSearchThreads, 0, stream>>>(
        sorted, segments, count, keep, slots, queries, anchors, d, view, inner_product, rescored, ends);
    check_launch("rerank_kernel", stream);
}

}  // namespace vlattice::cuda
