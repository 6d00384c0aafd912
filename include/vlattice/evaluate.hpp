// Search quality of a compressed set: exhaustive k-nearest-neighbour search over the reconstructed
// vectors (each vector stands for its anchor), scored against known neighbours.
#pragma once

#include "vlattice/types.hpp"

#include <cstdint>
#include <vector>

namespace vlattice {

// k-recall@k: for each query, the k points whose reconstruction is nearest (ties by anchor id, then
// point index), and the share of them among the first k rows of `neighbors` (point ids, as floats
// from read_vectors), averaged over the queries. Throws Error on shapes that do not fit together.
double recall_at_k(const Matrix& anchors, const std::vector<std::uint32_t>& assignments, const Matrix& queries,
                   const Matrix& neighbors, std::size_t k);

}  // namespace vlattice
