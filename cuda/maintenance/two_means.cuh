// split_in_two (include/vlattice/two_means.hpp) on the device, rounding for rounding: a cluster of
// blocks (one block without clusters) per anchor splits its gathered members where they lie, and
// only the two centres and two sums per anchor travel to the host. Sums over members run in member
// order in double, by one thread per coordinate (or, for the scalar sums, one thread); distances are
// ordered_squared_distance's, by a half warp per member and centre.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace vlattice::cuda {

struct TwoMeansArgs {
    const float* rows = nullptr;             // the members of anchors [first, first + count), packed (gather rows)
    const std::uint32_t* offsets = nullptr;  // device, of the whole list: anchor t's rows start at offsets[t]
    std::size_t first = 0;                   // rows[0] is the first member of anchor `first`
    std::size_t count = 0;
    int d = 0;
    // Of the whole list, indexed by list position: per anchor the mean (scratch) and the two centres
    // (left, then right) in d floats each, `before` and `after`, and whether it split.
    float* means = nullptr;
    float* centres = nullptr;
    double* sums = nullptr;
    int* ok = nullptr;
    // Scratch per listed anchor: the member sums of each side (2 d), and the blocks' counts of
    // members that changed side and that went right (2 per block of the anchor's cluster).
    double* side_sums = nullptr;
    int* counts = nullptr;
    // Per member of the piece: its distances to the two centres, and its side (scratch).
    float* distances = nullptr;  // 2 per member
    signed char* sides = nullptr;
    // A cluster of kTwoMeansBlocks blocks per anchor (sm_90 on), or one block.
    bool clusters = true;
    std::size_t shared_limit = 0;  // the GPU's shared memory per block (opt-in)
};

// Blocks per anchor in a cluster: TwoMeansArgs::counts holds 2 kTwoMeansBlocks ints per listed anchor.
constexpr int kTwoMeansBlocks = 8;

void launch_two_means(const TwoMeansArgs& args, cudaStream_t stream);

}  // namespace vlattice::cuda
