// The scans of a row of fast float32 distances ||x||^2 + ||c||^2 - 2 x.c that pick the candidates of
// an exact nearest-anchor search: the float argmin, then every anchor within the rounding bound of
// it, which the caller re-scores in double. Each has an AVX2 copy that computes the same values.
#pragma once

#include <cstddef>
#include <cstdint>

namespace vlattice::cpu {

// Worst-case error of a fast distance relative to ||x||^2 + ||c||^2: (d + 8) u.
float rounding_factor(std::size_t d);

// The products x.c_j in `row` become fast distances.
void to_distances(float* row, const float* anchor_norms, float x_norm, std::size_t m);

// The first index of the smallest value of `row`, NaN left out (0 when none is finite).
std::uint32_t first_least(const float* row, std::size_t m);

// The smallest value of `row`, NaN left out (+inf when none is below it).
float least_value(const float* row, std::size_t m);

// The indices j, increasing, with row[j] <= threshold, into `out`; returns their count.
std::size_t within(const float* row, std::size_t m, float threshold, std::uint32_t* out);

}  // namespace vlattice::cpu
