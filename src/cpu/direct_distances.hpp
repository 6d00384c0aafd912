// The fast distances of a point to every anchor, computed directly: for the assign at small
// dimensions, where a GEMM's inner length is too short to pay for its packing and the products it
// writes cost more than they took (sub-space fits of product codes: a few dimensions, 256 or 4,096
// anchors), and for encoding with a codebook.
#pragma once

#include "vlattice/types.hpp"

#include <cstddef>
#include <vector>

namespace vlattice::cpu {

// The assign takes the direct distances, and with them its bounds and neighbourhoods, up to this
// many dimensions (docs/perf.md has the measurements); beyond, the GEMM's kernel.
constexpr std::size_t kDirectDims = 16;

// The anchors' coordinates by dimension: d rows of m values.
std::vector<float> anchor_columns(const Matrix& anchors);

// For two points p (which may be the same one): row[p][j] = x_norm[p] + norms[j] - 2 x[p].c_j for the
// m anchors of `columns`, in float, the product summed over t = 0..d-1 in that order: the same bits
// on every CPU. Two at a time, so that each anchor column is read once for both.
void direct_distances(const float* const x[2], const float x_norm[2], const float* columns, const float* norms,
                      std::size_t d, std::size_t m, float* const row[2]);

}  // namespace vlattice::cpu
