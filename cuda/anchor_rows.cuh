// Row-wise device work on anchors and points: the update step, replacing listed anchor rows, and
// gathering the members of one anchor.
#pragma once

#include "point_rows.cuh"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace vlattice::cuda {

// c_j <- float(c_j + eta * (mu_j - c_j)) for every anchor with kept members, rounded step by step
// like the CPU (no fused multiply-add), so equal means give equal anchors.
void launch_update(float* anchors, const double* means, const std::uint32_t* kept, std::size_t m, int d, double eta,
                   cudaStream_t stream);

// anchors row rows[r] <- staged row r, for r < count.
void launch_scatter_rows(float* anchors, const float* staged, const std::uint32_t* rows, std::size_t count, int d,
                         cudaStream_t stream);

// members <- the indices i with assignment[i] == anchor, in increasing order; *selected <- how many.
std::size_t select_members_temp_bytes(std::size_t n);
void launch_select_members(const std::uint32_t* assignment, std::size_t n, std::uint32_t anchor,
                           std::uint32_t* members, std::int64_t* selected, void* temp, std::size_t temp_bytes,
                           cudaStream_t stream);

// out row r <- points row members[r] as float32, for r < count.
void launch_gather_rows(const PointRows& points, const std::uint32_t* members, std::size_t count, int d, float* out,
                        cudaStream_t stream);

}  // namespace vlattice::cuda
