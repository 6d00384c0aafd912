// The device half of the search of product-coded files, by asymmetric distance
// (include/vlattice/search.hpp) with the CPU's arithmetic (src/codes/product_search.cpp): per batch,
// each query's rotation and lookup tables; per part of a batch, every candidate's key from one
// table lookup per ScanUnits lookup; and for a re-rank, keys scored against the reconstruction.
#pragma once

#include "search/product_row.cuh"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace vlattice::cuda {

// rotated (count x p) <- Rq and tables (count x table_values(view)) <- T_u of each query
// (count x d, device).
void product_query_tables(const ProductView& view, const float* queries, std::size_t count, int d, float* rotated,
                          float* tables, cudaStream_t stream);

// Where the candidates of a part of a batch are (cuda/search/search.cu): its queries are the batch's first,
// first + 1, ..., first + count - 1; query q's candidates are the batch's query_offsets[q] ..
// query_offsets[q + 1] - 1, by slot (probed anchor) as slot_offsets says, and go to keys from base on.
struct ProductPart {
    const std::uint64_t* probes;        // batch x m keys, each query's probed anchors first
    const std::int64_t* slot_offsets;   // batch x nprobe + 1
    const std::int64_t* query_offsets;  // batch + 1
    std::size_t m;
    std::size_t nprobe;
    const std::size_t* start;       // m + 1: anchor j's members are at positions start[j] .. start[j + 1] - 1
    const std::uint32_t* members;   // vector id by member position
    std::size_t first;
    std::size_t count;
    std::int64_t base;
    std::size_t widest;  // the most candidates any one of its queries has
};

// keys[c - base] <- (asymmetric score, vector id) of every candidate c of the part; tables are the
// batch's (product_query_tables).
void product_keys(const ProductPart& part, const ProductView& view, const float* tables, bool inner_product,
                  std::uint64_t* keys, cudaStream_t stream);

// For each of the part's count queries, whose keys sorted[segments[q] .. segments[q + 1]) are in
// order: rescored[segments[q] + r] <- (exact score against the reconstruction, id) of key r for
// r < min(keep, segment length), and ends[q] <- segments[q] + that minimum. queries: the part's,
// count x d; widest: the longest segment.
void rerank_keys(const std::uint64_t* sorted, const std::int64_t* segments, std::size_t count, std::size_t keep,
                 std::size_t widest, const float* queries, const float* anchors, int d, const ProductView& view,
                 bool inner_product, std::uint64_t* rescored, std::int64_t* ends, cudaStream_t stream);

}  // namespace vlattice::cuda
