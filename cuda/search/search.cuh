// k-NN over a compressed set on the device, one batch of queries at a time, with the CPU's arithmetic
// and order (include/vlattice/search.hpp): each query's scores against every anchor are sorted as
// (score, anchor id) keys and its first nprobe anchors probed; each probed member is scored against
// its reconstruction, decoded on the fly; the (score, vector id) keys are sorted per query and the
// first k kept. Keys are 64 bits, the score's ordered_bits over the id, so that they sort like the
// scores, negative ones (ip's) included; no score is -0 (src/search/search_scores.hpp), which those bits
// would put before +0 where the CPU sees a tie. Product codes are scored by asymmetric distance
// instead (cuda/search/product_search.cuh), and optionally re-ranked by their reconstruction.
#pragma once

#include "runtime/device_buffer.hpp"
#include "search/decoded_row.cuh"
#include "search/product_row.cuh"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace vlattice::cuda {

// What every batch reads: the file on the device.
struct SearchData {
    CodesView codes;
    std::size_t m = 0;
    const std::size_t* start = nullptr;      // m + 1: anchor j's members are members[start[j] .. start[j + 1])
    const std::uint32_t* members = nullptr;  // n vector ids, by anchor, each anchor's in increasing order
    std::size_t nprobe = 0;                  // 1 to m
    std::size_t k = 0;                       // >= 1
    // Scores are inner_product_score(ordered_dot) (metric ip) instead of ordered_squared_distance.
    bool inner_product = false;
    ProductView product;     // active for a product-coded file
    std::size_t rerank = 0;  // SearchOptions::rerank; product codes only
};

// Device memory kept from batch to batch, grown when a batch needs more.
struct SearchScratch {
    DeviceBuffer<std::uint64_t> probe_keys[2];      // batch x m
    DeviceBuffer<std::int64_t> slot_offsets;        // batch x nprobe + 1
    DeviceBuffer<std::int64_t> query_offsets;       // batch + 1
    DeviceBuffer<std::int64_t> segments;            // batch + 1: sort segments
    DeviceBuffer<std::uint64_t> candidate_keys[2];  // a part's candidates
    DeviceBuffer<unsigned char> temp;               // CUB's
    PinnedBuffer<std::int64_t> host_query_offsets;  // batch + 1
    DeviceBuffer<float> rotated;                    // batch x p: product codes' Rq
    DeviceBuffer<float> tables;                     // batch x table_values: their T_u
    DeviceBuffer<std::int64_t> rerank_ends;         // a part's queries: where their re-ranked keys end
};

// Queries per batch, so that its query-anchor keys, its queries, its results and its per-query
// values (product codes' tables) each stay within kBatchValues values.
constexpr std::size_t kBatchValues = std::size_t{1} << 24;
std::size_t search_batch_queries(std::size_t m, std::size_t d, std::size_t k, std::size_t per_query);

// Candidates scored and sorted at once: the batch's queries go through in parts of at most this many
// candidates, or of one query with more.
constexpr std::size_t kPartCandidates = std::size_t{1} << 25;

// Rows q < count of ids and distances (count x k, device) <- the k best neighbours of query row q
// (queries: count x d, device) and their scores, padded with -1 and +infinity. Returns the number of
// vectors scored.
std::uint64_t search_batch(const SearchData& data, const float* queries, std::size_t count, std::int64_t* ids,
                           float* distances, SearchScratch& scratch, cudaStream_t stream);

}  // namespace vlattice::cuda
