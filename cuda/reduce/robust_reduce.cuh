// Trimmed mean per anchor on the device, the CPU's bits (fit/exact_sums.hpp). A stable radix sort
// groups the members by anchor, and a radix select per anchor puts its kept members, the smallest
// by (distance, point index), first in its segment. Each anchor's grid comes from its largest kept
// distance and its largest coordinate; a block per chunk of 64 kept members adds their values on
// the grid in doubles, exactly, and adds the integer sums into the anchor's with 64-bit atomics,
// whose total does not depend on the order. Streamed points add the members of each tile the same
// way, so a streamed reduce needs no memory beyond the anchors'.
#pragma once

#include "fit/exact_sums.hpp"
#include "math/point_rows.cuh"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace vlattice::cuda {

struct ReduceArgs {
    const float* anchors = nullptr;
    const double* distance = nullptr;        // n: each point's distance to its anchor, from assign
    const std::uint32_t* assignment = nullptr;
    std::size_t n = 0;
    std::size_t m = 0;
    int d = 0;
    // The share to trim is read on the device, so that a captured reduce serves every temperature;
    // `trims` says whether it can drop any member at all (floor(trim * n) > 0), which decides
    // whether the members are sorted by distance first.
    const double* trim = nullptr;
    bool trims = false;

    // Sort scratch, n entries each, two of each for the radix sort's double buffering.
    std::uint32_t* anchor_keys[2] = {nullptr, nullptr};
    std::uint32_t* members[2] = {nullptr, nullptr};

    std::uint32_t* offsets = nullptr;        // m + 1: segment of anchor j in the sorted members
    std::uint32_t* item_counts = nullptr;    // m + 1 scratch
    std::uint32_t* item_offsets = nullptr;   // m + 1: first chunk of anchor j
    unsigned long long* farthest = nullptr;  // m: the bits of each anchor's largest kept distance
    SumGrid* grids = nullptr;                // 2 m: each anchor's coordinate grid, then its distance grid
    // m * d + m: the coordinate sums on their grids, then the distance sums (two's complement).
    unsigned long long* sums = nullptr;
    unsigned* stray = nullptr;               // 1: set when a chunk's sum passes its grid's bound
    // Streamed points: the chunks of each anchor a tile touches; unused when held.
    struct TileChunks {
        std::uint32_t* first_chunk = nullptr;   // m: the first chunk of anchor j the tile touches
        std::uint32_t* chunk_counts = nullptr;  // m + 1: how many it touches
        std::uint32_t* chunk_base = nullptr;    // m + 1: where they start in the tile's list
    } tiles;

    // Results.
    std::uint32_t* count = nullptr;          // m
    std::uint32_t* kept = nullptr;           // m
    double* variance = nullptr;              // m
    double* means = nullptr;                 // m * d; rows of empty anchors are left as they were

    void* temp = nullptr;
    std::size_t temp_bytes = 0;
};

// Upper bound on the number of member chunks: sum_j ceil(kept_j / chunk) <= n / chunk + m.
std::size_t max_member_chunks(std::size_t n, std::size_t m);
std::size_t robust_reduce_temp_bytes(std::size_t n, std::size_t m);
// Whether trimming `trim` of n points can drop any member of any anchor.
bool trims_any(double trim, std::size_t n);
// The chunks a tile of `rows` points touches, at most: anchor j's r_j members in the tile span at
// most ceil(r_j / chunk) + 1 of its chunks, and at most min(m, rows) anchors have any.
std::size_t tile_chunk_slots(std::size_t rows, std::size_t m);
// A reduce in four steps, so that the member sums can take streamed points a tile at a time:
// the members grouped by anchor, each anchor's kept ones first (returns where the grouped members
// lie, once the stream has run); each anchor's grids, its distance sum and zeroed coordinate sums;
// the member sums, of the held points at once or of every tile of the streamed points; then each
// anchor's mean and variance.
const std::uint32_t* launch_reduce_groups(const ReduceArgs& args, cudaStream_t stream);
void launch_reduce_grids(const ReduceArgs& args, const std::uint32_t* grouped, cudaStream_t stream);
void launch_member_sums(const ReduceArgs& args, const std::uint32_t* grouped, const PointRows& points,
                        cudaStream_t stream);
struct MemberTile {
    PointRows points;  // rows [first, first + rows) of the points
    std::size_t first = 0;
    std::size_t rows = 0;
};
void launch_tile_sums(const ReduceArgs& args, const std::uint32_t* grouped, const MemberTile& tile,
                      cudaStream_t stream);
void launch_reduce_finalize(const ReduceArgs& args, cudaStream_t stream);

}  // namespace vlattice::cuda
