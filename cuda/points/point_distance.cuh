// Per-row double-precision work of size n*d: squared norms, each point's distance to its anchor and
// the deterministic energy sum.
#pragma once

#include "math/point_rows.cuh"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace vlattice::cuda {

// norms[r] = float(||row r||^2 accumulated in double), as the CPU stores them. When max_bits is given
// (the caller zeroes it first), it receives the bits of the largest norm.
void launch_squared_norms(const PointRows& rows, std::size_t count, int d, float* norms, unsigned* max_bits,
                          cudaStream_t stream);

// Each warp measures this many consecutive points, and each block of eight warps sums their
// distances in a fixed order. Few points per warp, so that small sets still spread over every
// multiprocessor: at 10,000 points, 32 per warp kept a warp waiting on eight rounds of loads.
constexpr std::size_t kPointsPerDistanceWarp = 8;
constexpr std::size_t kPointsPerDistanceBlock = 8 * kPointsPerDistanceWarp;
inline std::size_t distance_block_count(std::size_t n) {
    return (n + kPointsPerDistanceBlock - 1) / kPointsPerDistanceBlock;
}

struct PointDistanceArgs {
    PointRows points;
    const float* anchors = nullptr;
    std::size_t n = 0;
    int d = 0;
    const std::uint32_t* source = nullptr;    // the anchor of each point
    std::uint32_t* assignment = nullptr;      // optional: receives source; `changed` counts differences
    unsigned long long* changed = nullptr;    // required with assignment, zeroed by the caller
    double* distance = nullptr;               // optional: each point's distance
    double* block_sums = nullptr;             // distance_block_count(n) partial sums
};

void launch_point_distances(const PointDistanceArgs& args, cudaStream_t stream);

// total = sum of values, with the same rounding on every call on the same device.
std::size_t sum_temp_bytes(std::size_t count);
void launch_sum(const double* values, std::size_t count, double* total, void* temp, std::size_t temp_bytes,
                cudaStream_t stream);

}  // namespace vlattice::cuda
