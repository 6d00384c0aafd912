#include "math/segments.cuh"

#include "math/warp_math.cuh"
#include "runtime/cuda_check.hpp"

namespace vlattice::cuda {

namespace {

constexpr int kThreads = 256;

// Position p writes the segments after the previous position's key up to its own; position n writes
// the rest up to `segments`. Together that is O(n + segments).
__global__ void segment_offsets_kernel(const std::uint32_t* __restrict__ sorted_keys, std::size_t n,
                                       std::size_t segments, std::uint32_t* __restrict__ offsets) {
    const std::size_t p = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (p > n) {
        return;
    }
    const std::size_t first = p == 0 ? 0 : static_cast<std::size_t>(sorted_keys[p - 1]) + 1;
    const std::size_t last = p == n ? segments : static_cast<std::size_t>(sorted_keys[p]);
    for (std::size_t s = first; s <= last; ++s) {
        offsets[s] = static_cast<std::uint32_t>(p);
    }
}

}  // namespace

void launch_segment_offsets(const std::uint32_t* sorted_keys, std::size_t n, std::size_t segments,
                            std::uint32_t* offsets, cudaStream_t stream) {
    const auto blocks = static_cast<unsigned>(ceil_div(n + 1, kThreads));
    segment_offsets_kernel<<<blocks, kThreads, 0, stream>>>(sorted_keys, n, segments, offsets);
    check_launch("segment_offsets_kernel", stream);
}

}  // namespace vlattice::cuda
