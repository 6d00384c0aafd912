// The first `limit` members, by point index, of each of a list of anchors, gathered as float32 rows:
// what maintenance splits with 2-means. One pass selects the members of every listed anchor in point
// order, a stable sort groups them by list position, and the kept rows are packed, anchor after
// anchor, in as few gathers as a bounded buffer allows: a whole list costs a few launches and waits
// instead of that per anchor, and only the rows kept travel to the host.
#pragma once

#include "math/point_rows.cuh"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace vlattice::cuda {

struct GatherArgs {
    PointRows points;
    const std::uint32_t* assignment = nullptr;  // n
    std::size_t n = 0;
    std::size_t m = 0;
    int d = 0;
    const std::uint32_t* listed = nullptr;  // count distinct anchor ids; ids >= m have no members
    std::size_t count = 0;

    // Scratch.
    std::uint32_t* slot_of = nullptr;                     // m
    std::uint32_t* keys[2] = {nullptr, nullptr};          // n each
    std::uint32_t* members[2] = {nullptr, nullptr};       // n each
    std::int64_t* selected = nullptr;                     // 1: how many points belong to listed anchors
    void* temp = nullptr;
    std::size_t temp_bytes = 0;

    // Result of the grouping.
    std::uint32_t* offsets = nullptr;  // count + 1: list position t's members are [offsets[t], offsets[t + 1])
};

std::size_t gather_members_temp_bytes(std::size_t n);
// First half: the members of every listed anchor, in point order; *selected receives their number.
void launch_select_listed(const GatherArgs& args, cudaStream_t stream);
// Once the caller has read `selected`: the members grouped by list position (offsets); returns where
// the grouped member ids are (one of args.members).
const std::uint32_t* launch_group_listed(const GatherArgs& args, std::size_t selected, cudaStream_t stream);
// The rows of list positions [first, first + count): position t's first kept_offsets[t + 1] -
// kept_offsets[t] members (at most its members), packed into `rows` from row
// kept_offsets[t] - kept_offsets[first]; row_count is kept_offsets[first + count] -
// kept_offsets[first]. kept_offsets is on the device, count + 1 of the whole list. The member ids
// are packed first, into args.keys[0] (the grouping is done with it).
void launch_gather_rows(const GatherArgs& args, const std::uint32_t* grouped, const std::uint32_t* kept_offsets,
                        std::size_t first, std::size_t count, std::size_t row_count, float* rows,
                        cudaStream_t stream);

}  // namespace vlattice::cuda
