#include "search/decode_rows.cuh"

#include "math/warp_math.cuh"
#include "runtime/cuda_check.hpp"

namespace vlattice::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void decode_rows_kernel(CodesView codes, const std::uint32_t* __restrict__ assignments, std::size_t first,
                                   std::size_t values, float* __restrict__ out) {
    const std::size_t e = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (e >= values) {
        return;
    }
    const std::size_t i = first + e / codes.d;
    const int k = static_cast<int>(e % codes.d);
    const std::uint32_t anchor = assignments[i];
    out[e] = codes.has_codes ? codes.row(anchor, i)(k) : codes.anchors[static_cast<std::size_t>(anchor) * codes.d + k];
}

}  // namespace

void launch_decode_rows(const CodesView& codes, const std::uint32_t* assignments, std::size_t first, std::size_t count,
                        float* out, cudaStream_t stream) {
    const std::size_t values = count * static_cast<std::size_t>(codes.d);
    if (values == 0) {
        return;
    }
    decode_rows_kernel<<<static_cast<unsigned>(ceil_div(values, kThreads)), kThreads, 0, stream>>>(codes, assignments,
                                                                                                    first, values, out);
    check_launch("decode_rows_kernel", stream);
}

}  // namespace vlattice::cuda
