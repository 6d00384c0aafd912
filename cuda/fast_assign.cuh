// The fast half of the exact assign: kernels that compute every point-anchor distance in float from
// ||x||^2 + ||c||^2 - 2 x.c, keep each point's Candidate instead of writing the n x m distances, and
// state how far their distances can be from exact. Three are available: float32 FMAs; tensor cores
// with tf32 operands (several times the throughput, a window of uncertainty ~100x wider); and tensor
// cores with split tf32 operands (3xtf32: three times tf32's tensor work, a window ~5x float32's).
#pragma once

#include "candidate.cuh"

#include <cuda_runtime.h>

#include <cstddef>

namespace vlattice::cuda {

// Both kernels tile the points and the anchors by this many rows.
constexpr int kFastTile = 128;

enum class FastPath { fp32, tf32, tf32x3 };

struct FastAssignArgs {
    const float* points = nullptr;
    const float* point_norms = nullptr;
    const float* anchors = nullptr;
    const float* anchor_norms = nullptr;
    std::size_t n = 0;
    std::size_t m = 0;
    int d = 0;
    bool exclude_self = false;  // point i may not take anchor i
    int splits = 1;             // blockIdx.y: one range of anchor tiles each
    int tiles_per_split = 1;
    Candidate* candidates = nullptr;  // splits * n
};

// The anchor tiles [begin, end) of this block's split (blockIdx.y).
struct TileRange {
    std::size_t begin;
    std::size_t end;
};
__device__ __forceinline__ TileRange split_tiles(std::size_t m, int tiles_per_split) {
    const std::size_t tiles = (m + kFastTile - 1) / kFastTile;
    const std::size_t begin = static_cast<std::size_t>(blockIdx.y) * tiles_per_split;
    return {begin, begin + tiles_per_split < tiles ? begin + tiles_per_split : tiles};
}

void launch_fast_assign_fp32(const FastAssignArgs& args, cudaStream_t stream);
void launch_fast_assign_tf32(const FastAssignArgs& args, cudaStream_t stream);
void launch_fast_assign_tf32x3(const FastAssignArgs& args, cudaStream_t stream);

// Bounds on |fast - exact| of any distance, relative to ||x||^2 + ||c||^2.
float fp32_rounding_factor(int d);
float tf32_rounding_factor(int d);
float tf32x3_rounding_factor(int d);

}  // namespace vlattice::cuda
