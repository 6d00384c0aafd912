// Row-wise device work on anchors and points: the update step and how far it moves each anchor,
// replacing listed anchor rows, and gathering listed point rows.
#pragma once

#include "math/point_rows.cuh"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace vlattice::cuda {

// c_j <- float(c_j + eta * (mu_j - c_j)) for every anchor with kept members, rounded step by step
// like the CPU (no fused multiply-add), so equal means give equal anchors; and moved[j] += the length
// of that step (rounded up): how far each anchor has gone since the points' distances were taken
// (single_window.cuh's PriorArgs).
void launch_update(float* anchors, const double* means, const std::uint32_t* kept, std::size_t m, int d, double eta,
                   float* moved, cudaStream_t stream);

// values[e] <- value for e < count; values[rows[r]] <- value for r < count.
void launch_fill(float* values, std::size_t count, float value, cudaStream_t stream);
void launch_fill_listed(float* values, const std::uint32_t* rows, std::size_t count, float value, cudaStream_t stream);

// anchors row rows[r] <- staged row r, for r < count.
void launch_scatter_rows(float* anchors, const float* staged, const std::uint32_t* rows, std::size_t count, int d,
                         cudaStream_t stream);

// out row r <- points row members[r] as float32, for r < count.
void launch_gather_rows(const PointRows& points, const std::uint32_t* members, std::size_t count, int d, float* out,
                        cudaStream_t stream);

}  // namespace vlattice::cuda
