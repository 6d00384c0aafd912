#include "search/search.cuh"

#include "math/ordered_distance.cuh"
#include "math/warp_math.cuh"
#include "runtime/cuda_check.hpp"
#include "search/product_search.cuh"
#include "search/search_device.cuh"

#include <cub/device/device_scan.cuh>
#include <cub/device/device_segmented_sort.cuh>

#include <math_constants.h>

#include <algorithm>

namespace vlattice::cuda {

namespace {

// keys[q * m + j] <- (score of query q against anchor j, j), a half warp per pair.
__global__ void probe_keys_kernel(const float* __restrict__ queries, std::size_t count,
                                  const float* __restrict__ anchors, std::size_t m, int d, bool inner_product,
                                  std::uint64_t* __restrict__ keys) {
    const std::size_t pairs = count * m;
    const std::size_t p = half_warp_index();
    const int l = threadIdx.x % kDistanceLanes;
    // Past the end: pair 0, so that every thread reaches the shuffles.
    const std::size_t pair = p < pairs ? p : 0;
    const float value = exact_score(queries + pair / m * d, anchors + pair % m * d, d, l, inner_product);
    if (p < pairs && l == 0) {
        keys[p] = sort_key(value, static_cast<std::uint32_t>(pair % m));
    }
}

// offsets[s] <- s * step for s <= count: the bounds of count segments of `step` keys each.
__global__ void multiples_kernel(std::size_t count, std::size_t step, std::int64_t* __restrict__ offsets) {
    const std::size_t s = thread_index();
    if (s <= count) {
        offsets[s] = static_cast<std::int64_t>(s * step);
    }
}

// Slot t is the (t % nprobe)-th probed anchor of query t / nprobe: counts[t] <- its members. And
// counts[slots] <- 0, so that the exclusive scan ends with the total.
__global__ void slot_counts_kernel(const std::uint64_t* __restrict__ probes, std::size_t m, std::size_t nprobe,
                                   std::size_t slots, const std::size_t* __restrict__ start,
                                   std::int64_t* __restrict__ counts) {
    const std::size_t t = thread_index();
    if (t < slots) {
        const std::uint32_t j = key_id(probes[t / nprobe * m + t % nprobe]);
        counts[t] = static_cast<std::int64_t>(start[j + 1] - start[j]);
    } else if (t == slots) {
        counts[t] = 0;
    }
}

// query_offsets[q] <- slot_offsets[q * nprobe] for q <= count: where query q's candidates begin.
__global__ void query_offsets_kernel(const std::int64_t* __restrict__ slot_offsets, std::size_t nprobe,
                                     std::size_t count, std::int64_t* __restrict__ query_offsets) {
    const std::size_t q = thread_index();
    if (q <= count) {
        query_offsets[q] = slot_offsets[q * nprobe];
    }
}

// segments[s] <- query_offsets[first + s] - query_offsets[first] for s <= count: a part's sort segments.
__global__ void part_segments_kernel(const std::int64_t* __restrict__ query_offsets, std::size_t first,
                                     std::size_t count, std::int64_t* __restrict__ segments) {
    const std::size_t s = thread_index();
    if (s <= count) {
        segments[s] = query_offsets[first + s] - query_offsets[first];
    }
}

// The queries of a part and where their candidates are: slots first_slot .. end_slot - 1, whose
// candidates are the batch's base .. base + total - 1.
struct Part {
    const std::uint64_t* probes;       // batch x m keys, each query's probed anchors first
    const std::int64_t* slot_offsets;  // the batch's
    std::size_t m;
    std::size_t nprobe;
    const std::size_t* start;
    const std::uint32_t* members;
    std::size_t first_slot;
    std::size_t end_slot;
    std::int64_t base;
    std::size_t total;
};

struct Candidate {
    std::size_t query;  // in the batch
    std::uint32_t anchor;
    std::uint32_t id;
    float anchor_score;
};

// The part's candidate c belongs to the last slot whose offset is <= base + c (empty slots share
// their successor's offset).
__device__ Candidate locate(const Part& part, std::size_t c) {
    const std::int64_t g = part.base + static_cast<std::int64_t>(c);
    std::size_t lo = part.first_slot;
    std::size_t hi = part.end_slot;
    while (hi - lo > 1) {
        const std::size_t mid = lo + (hi - lo) / 2;
        if (part.slot_offsets[mid] <= g) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    const std::size_t query = lo / part.nprobe;
    const std::uint64_t probe = part.probes[query * part.m + lo % part.nprobe];
    const std::uint32_t anchor = key_id(probe);
    const std::size_t member = part.start[anchor] + static_cast<std::size_t>(g - part.slot_offsets[lo]);
    return {query, anchor, part.members[member], key_score(probe)};
}

// Without codes a vector's reconstruction is its anchor, and so is its score.
__global__ void anchor_keys_kernel(Part part, std::uint64_t* __restrict__ keys) {
    const std::size_t c = thread_index();
    if (c < part.total) {
        const Candidate x = locate(part, c);
        keys[c] = sort_key(x.anchor_score, x.id);
    }
}

// A half warp per candidate, against its reconstruction decoded on the fly.
__global__ void decoded_keys_kernel(Part part, CodesView codes, const float* __restrict__ queries,
                                    bool inner_product, std::uint64_t* __restrict__ keys) {
    const std::size_t c = half_warp_index();
    const int l = threadIdx.x % kDistanceLanes;
    // Past the end: candidate 0, so that every thread reaches the shuffles.
    const Candidate x = locate(part, c < part.total ? c : 0);
    const float value =
        exact_score(queries + x.query * codes.d, codes.row(x.anchor, x.id), codes.d, l, inner_product);
    if (c < part.total && l == 0) {
        keys[c] = sort_key(value, x.id);
    }
}

// Row s of ids and distances <- the first k keys of sorted segment s, sorted[begins[s] .. ends[s])
// (ids and scores), then -1 and +infinity.
__global__ void take_kernel(const std::uint64_t* __restrict__ sorted, const std::int64_t* __restrict__ begins,
                            const std::int64_t* __restrict__ ends, std::size_t count, std::size_t k,
                            std::int64_t* __restrict__ ids, float* __restrict__ distances) {
    const std::size_t e = thread_index();
    if (e >= count * k) {
        return;
    }
    const std::int64_t begin = begins[e / k];
    const auto r = static_cast<std::int64_t>(e % k);
    if (r < ends[e / k] - begin) {
        const std::uint64_t key = sorted[begin + r];
        ids[e] = key_id(key);
        distances[e] = key_score(key);
    } else {
        ids[e] = -1;
        distances[e] = CUDART_INF_F;
    }
}

void* cub_temp(SearchScratch& scratch, std::size_t bytes) {
    // Never null: CUB takes a null scratch pointer as a request for its size, and would do nothing.
    return grow_buffer(scratch.temp, std::max<std::size_t>(bytes, 1));
}

// Sorts each of `segments` segments of keys, keys[begins[s] .. ends[s]) (bounds on the device),
// ascending, with `spare` as the other half of the double buffer; returns whichever holds the result.
std::uint64_t* sort_segments(std::uint64_t* keys, std::uint64_t* spare, std::size_t items, std::size_t segments,
                             const std::int64_t* begins, const std::int64_t* ends, SearchScratch& scratch,
                             cudaStream_t stream) {
    cub::DoubleBuffer<std::uint64_t> buffers(keys, spare);
    const auto item_count = static_cast<std::int64_t>(items);
    const auto segment_count = static_cast<std::int64_t>(segments);
    std::size_t bytes = 0;
    CUDA_CHECK(cub::DeviceSegmentedSort::SortKeys(nullptr, bytes, buffers, item_count, segment_count, begins, ends,
                                                  stream));
    CUDA_CHECK(cub::DeviceSegmentedSort::SortKeys(cub_temp(scratch, bytes), bytes, buffers, item_count, segment_count,
                                                  begins, ends, stream));
    return buffers.Current();
}

// A batch's probes and candidate offsets, on the device and (per query) on the host.
struct Batch {
    const float* queries;
    const std::uint64_t* probes;
    const std::int64_t* slot_offsets;
    const std::int64_t* query_offsets;
    const std::int64_t* host_query_offsets;
};

// The most candidates any of queries first .. end - 1 of the batch has.
std::size_t widest_query(const Batch& batch, std::size_t first, std::size_t end) {
    std::int64_t widest = 0;
    for (std::size_t q = first; q < end; ++q) {
        widest = std::max(widest, batch.host_query_offsets[q + 1] - batch.host_query_offsets[q]);
    }
    return static_cast<std::size_t>(widest);
}

// Scores, sorts and takes the k nearest of queries first .. end - 1 of the batch; with a re-rank,
// the first max(k, rerank) of each sorted segment are scored again, sorted again, and then taken.
void search_part(const SearchData& data, const Batch& batch, std::size_t first, std::size_t end, std::int64_t* ids,
                 float* distances, SearchScratch& scratch, cudaStream_t stream) {
    const std::size_t count = end - first;
    const std::int64_t base = batch.host_query_offsets[first];
    const auto total = static_cast<std::size_t>(batch.host_query_offsets[end] - base);
    std::int64_t* segments = grow_buffer(scratch.segments, count + 1);
    part_segments_kernel<<<blocks_for(count + 1), kSearchThreads, 0, stream>>>(batch.query_offsets, first, count,
                                                                              segments);
    check_launch("part_segments_kernel", stream);
    const std::uint64_t* sorted = nullptr;  // not read when the part has no candidates
    const std::int64_t* ends = segments + 1;
    if (total > 0) {
        const Part part{batch.probes, batch.slot_offsets, data.m, data.nprobe, data.start, data.members,
                        first * data.nprobe, end * data.nprobe, base, total};
        std::uint64_t* keys = grow_buffer(scratch.candidate_keys[0], total);
        const std::size_t widest = widest_query(batch, first, end);
        if (data.product.active) {
            const ProductPart product_part{batch.probes, batch.slot_offsets, batch.query_offsets, data.m,
                                           data.nprobe, data.start, data.members, first, count, base, widest};
            product_keys(product_part, data.product, scratch.tables.data(), data.inner_product, keys, stream);
        } else if (data.codes.has_codes) {
            decoded_keys_kernel<<<half_warp_blocks(total), kSearchThreads, 0, stream>>>(
                part, data.codes, batch.queries, data.inner_product, keys);
            check_launch("decoded_keys_kernel", stream);
        } else {
            anchor_keys_kernel<<<blocks_for(total), kSearchThreads, 0, stream>>>(part, keys);
            check_launch("anchor_keys_kernel", stream);
        }
        std::uint64_t* spare = grow_buffer(scratch.candidate_keys[1], total);
        std::uint64_t* in_order = sort_segments(keys, spare, total, count, segments, ends, scratch, stream);
        if (data.product.active && data.rerank > 0) {
            std::uint64_t* rescored = in_order == keys ? spare : keys;
            std::int64_t* rerank_ends = grow_buffer(scratch.rerank_ends, count);
            rerank_keys(in_order, segments, count, std::max(data.k, data.rerank), widest,
                        batch.queries + first * data.codes.d, data.codes.anchors, data.codes.d, data.product,
                        data.inner_product, rescored, rerank_ends, stream);
            ends = rerank_ends;
            in_order = sort_segments(rescored, in_order, total, count, segments, ends, scratch, stream);
        }
        sorted = in_order;
    }
    take_kernel<<<blocks_for(count * data.k), kSearchThreads, 0, stream>>>(sorted, segments, ends, count, data.k,
                                                                            ids + first * data.k,
                                                                            distances + first * data.k);
    check_launch("take_kernel", stream);
}

}  // namespace

std::size_t search_batch_queries(std::size_t m, std::size_t d, std::size_t k, std::size_t per_query) {
    const std::size_t widest = std::max({m, d, k, per_query, std::size_t{1}});
    return std::max<std::size_t>(1, kBatchValues / widest);
}

std::uint64_t search_batch(const SearchData& data, const float* queries, std::size_t count, std::int64_t* ids,
                           float* distances, SearchScratch& scratch, cudaStream_t stream) {
    const std::size_t m = data.m;
    const std::size_t nprobe = data.nprobe;
    const std::size_t pairs = count * m;
    std::uint64_t* probes = grow_buffer(scratch.probe_keys[0], pairs);
    probe_keys_kernel<<<half_warp_blocks(pairs), kSearchThreads, 0, stream>>>(
        queries, count, data.codes.anchors, m, data.codes.d, data.inner_product, probes);
    check_launch("probe_keys_kernel", stream);
    if (data.product.active) {
        const auto p = static_cast<std::size_t>(data.product.p);
        const std::size_t per_query = table_values(data.product);
        product_query_tables(data.product, queries, count, data.codes.d, grow_buffer(scratch.rotated, count * p),
                             grow_buffer(scratch.tables, count * per_query), stream);
    }
    if (nprobe < m) {
        // Sorted, each query's nprobe best anchors come first, ties to the lower id as on the CPU.
        std::int64_t* bounds = grow_buffer(scratch.segments, count + 1);
        multiples_kernel<<<blocks_for(count + 1), kSearchThreads, 0, stream>>>(count, m, bounds);
        check_launch("multiples_kernel", stream);
        probes = sort_segments(probes, grow_buffer(scratch.probe_keys[1], pairs), pairs, count, bounds, bounds + 1,
                               scratch, stream);
    }

    const std::size_t slots = count * nprobe;
    std::int64_t* slot_offsets = grow_buffer(scratch.slot_offsets, slots + 1);
    slot_counts_kernel<<<blocks_for(slots + 1), kSearchThreads, 0, stream>>>(probes, m, nprobe, slots, data.start,
                                                                             slot_offsets);
    check_launch("slot_counts_kernel", stream);
    std::size_t bytes = 0;
    const auto scanned = static_cast<std::int64_t>(slots + 1);
    CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, bytes, slot_offsets, scanned, stream));
    CUDA_CHECK(cub::DeviceScan::ExclusiveSum(cub_temp(scratch, bytes), bytes, slot_offsets, scanned, stream));
    std::int64_t* query_offsets = grow_buffer(scratch.query_offsets, count + 1);
    query_offsets_kernel<<<blocks_for(count + 1), kSearchThreads, 0, stream>>>(slot_offsets, nprobe, count,
                                                                               query_offsets);
    check_launch("query_offsets_kernel", stream);
    std::int64_t* host_offsets = grow_buffer(scratch.host_query_offsets, count + 1);
    CUDA_CHECK(cudaMemcpyAsync(host_offsets, query_offsets, (count + 1) * sizeof(std::int64_t), cudaMemcpyDeviceToHost,
                               stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));

    // Parts of whole queries, each within kPartCandidates candidates unless one query alone has more.
    const Batch batch{queries, probes, slot_offsets, query_offsets, host_offsets};
    const auto part_candidates = static_cast<std::int64_t>(kPartCandidates);
    for (std::size_t first = 0; first < count;) {
        std::size_t end = first + 1;
        while (end < count && host_offsets[end + 1] - host_offsets[first] <= part_candidates) {
            ++end;
        }
        search_part(data, batch, first, end, ids, distances, scratch, stream);
        first = end;
    }
    return static_cast<std::uint64_t>(host_offsets[count]);
}

}  // namespace vlattice::cuda
