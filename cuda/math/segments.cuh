// Where each segment of keys sorted in ascending order begins: shared by the robust reduce (members
// grouped by anchor) and the member gather (members grouped by list position).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace vlattice::cuda {

// offsets[s] = the first position p < n with sorted_keys[p] >= s, or n; for s = 0 .. segments.
// Every key must be below `segments`.
void launch_segment_offsets(const std::uint32_t* sorted_keys, std::size_t n, std::size_t segments,
                            std::uint32_t* offsets, cudaStream_t stream);

}  // namespace vlattice::cuda
