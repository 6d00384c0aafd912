// k-means++ on the GPU, step for step the CPU's kmeans_plus_plus (src/fit/init.cpp): the same double
// distances in the same order (ordered_squared_distance), the same triangle-inequality skips, the
// same block sums and the same walk to the target weight, so both pick the same anchors. Every round
// runs on the device, all in one cooperative launch; nothing comes back until the end.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace vlattice::cuda {

struct SeedArgs {
    const float* sample = nullptr;  // s x d: the sampled points' rows, in sample order
    int d = 0;
    std::size_t s = 0;
    std::size_t m = 0;
    const double* uniforms = nullptr;  // m - 1: round j's target is uniforms[j] * total weight
    float* anchors = nullptr;          // m x d: receives the picks
    // Scratch.
    double* nearest = nullptr;         // s: squared distance to the nearest pick so far
    std::uint32_t* owner = nullptr;    // s: which pick
    double* gap = nullptr;             // m: distance from each pick to the newest
    double* block_sums = nullptr;      // seed_block_count(s)
    int* block_lows = nullptr;         // seed_block_count(s): the lowest set bit of each block's weights
    std::uint32_t* chosen = nullptr;   // 1: the next pick's place in the sample; set by the caller for the first
    int* degenerate = nullptr;         // 1, zeroed by the caller: set when a round found every weight zero
};

// Weights are summed in blocks of this many, as DSquaredSampler::kBlock.
constexpr std::size_t kSeedBlock = 256;
__host__ __device__ inline std::size_t seed_block_count(std::size_t s) {
    return (s + kSeedBlock - 1) / kSeedBlock;
}

void launch_seed_anchors(const SeedArgs& args, cudaStream_t stream);

}  // namespace vlattice::cuda
