// Reconstructing vectors on the device: decode_row (include/vlattice/residual.hpp), bit for bit.
#pragma once

#include "search/decoded_row.cuh"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace vlattice::cuda {

// out (count x d) <- the reconstructions of vectors first .. first + count - 1, whose anchors are
// assignments[first ..]; a thread per value.
void launch_decode_rows(const CodesView& codes, const std::uint32_t* assignments, std::size_t first, std::size_t count,
                        float* out, cudaStream_t stream);

}  // namespace vlattice::cuda
