#include "search/decode_product.cuh"

#include "math/warp_math.cuh"
#include "runtime/cuda_check.hpp"

namespace vlattice::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void decode_product_kernel(ProductView codes, const float* __restrict__ anchors, int d, std::size_t first,
                                      std::size_t values, float* __restrict__ out) {
    const std::size_t e = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (e >= values) {
        return;
    }
    const std::size_t i = first + e / d;
    const int k = static_cast<int>(e % d);
    const ProductRow row{anchors + static_cast<std::size_t>(codes.assignments[i]) * d,
                         scan_code(codes, codes.positions[i]), codes, d};
    out[e] = row(k);
}

}  // namespace

void launch_decode_product(const ProductView& codes, const float* anchors, int d, std::size_t first, std::size_t count,
                           float* out, cudaStream_t stream) {
    const std::size_t values = count * static_cast<std::size_t>(d);
    if (values == 0) {
        return;
    }
    decode_product_kernel<<<static_cast<unsigned>(ceil_div(values, kThreads)), kThreads, 0, stream>>>(
        codes, anchors, d, first, values, out);
    check_launch("decode_product_kernel", stream);
}

}  // namespace vlattice::cuda
