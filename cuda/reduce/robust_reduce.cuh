// Trimmed mean per anchor on the device. A stable radix sort groups the members by anchor, and a
// radix select per anchor puts its kept members, the smallest by (distance, point index), first in
// its segment; the sums run in double, chunk by chunk and then chunk sums in order, with no
// atomics, so a run gives the same bits every time. Streamed points keep, per anchor, the sum of
// its chunks closed so far and the one chunk a tile boundary left open, instead of every chunk's
// sum: the same additions in the same order, in memory of the anchors and a tile, not of n.
#pragma once

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
    double* partial_sums = nullptr;          // held: max_member_chunks(n, m) * d
    double* partial_distance = nullptr;      // max_member_chunks(n, m)
    // Streamed points (TileSums below); unused when held.
    struct TileSums {
        std::size_t slots = 0;                  // tile_chunk_slots(tile rows, m)
        double* slot_sums = nullptr;            // slots * d: the sums of the chunks a tile touches
        double* totals = nullptr;               // m * d: each anchor's closed chunks, added in order
        double* open = nullptr;                 // m * d: each anchor's chunk left open by the last tile
        std::uint32_t* first_chunk = nullptr;   // m: the first chunk of anchor j the tile touches
        std::uint32_t* chunk_counts = nullptr;  // m + 1: how many it touches
        std::uint32_t* chunk_base = nullptr;    // m + 1: their first slot
        std::uint32_t* left_open = nullptr;     // m: whether the last of them goes on past the tile
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
// A reduce in three steps, so that the member sums can take streamed points a tile at a time:
// the members grouped by anchor, each anchor's kept ones first (returns where the grouped members
// lie, once the stream has run); the member sums, of the held points at once or of every tile of
// the streamed points in order, the first from row 0; then each anchor's mean and variance.
const std::uint32_t* launch_reduce_groups(const ReduceArgs& args, cudaStream_t stream);
void launch_member_sums(const ReduceArgs& args, const std::uint32_t* grouped, const PointRows& points,
                        cudaStream_t stream);
struct MemberTile {
    PointRows points;  // rows [first, first + rows) of the points
    std::size_t first = 0;
    std::size_t rows = 0;
};
void launch_tile_sums(const ReduceArgs& args, const std::uint32_t* grouped, const MemberTile& tile,
                      cudaStream_t stream);
// `streamed`: the sums came tile by tile (args.tiles.totals).
void launch_reduce_finalize(const ReduceArgs& args, const std::uint32_t* grouped, bool streamed, cudaStream_t stream);

}  // namespace vlattice::cuda
