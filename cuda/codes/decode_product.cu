#include "device_product.cuh"

#include "cuda_check.hpp"
#include "warp_math.cuh"

namespace vlattice::cuda {

namespace {

constexpr int kThreads = 256;

template <class T>
DeviceBuffer<T> upload(const std::vector<T>& values, cudaStream_t stream) {
    DeviceBuffer<T> out(values.size());
    if (!values.empty()) {
        CUDA_CHECK(cudaMemcpyAsync(out.data(), values.data(), out.bytes(), cudaMemcpyHostToDevice, stream));
    }
    return out;
}

// decode_product_row's sum, rotated coordinate by rotated coordinate, with every product and sum
// rounded on its own (no fused multiply-add), as the CPU does.
__global__ void decode_product_kernel(ProductView codes, const std::uint32_t* __restrict__ assignments,
                                      std::size_t first, std::size_t values, float* __restrict__ out) {
    const std::size_t e = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (e >= values) {
        return;
    }
    const std::size_t i = first + e / codes.d;
    const int k = static_cast<int>(e % codes.d);
    const std::uint8_t* code = codes.codes + i * codes.code_bytes;
    float s = 0.0f;
    for (int j = 0; j < codes.subspaces; ++j) {
        const unsigned c = codes.bits == 8 ? code[j] : (code[j / 2] >> (4 * (j % 2))) & 0xfu;
        const float* centroid = codes.centroids + static_cast<std::size_t>(c) * codes.p;
        for (unsigned t = codes.bounds[j]; t < codes.bounds[j + 1]; ++t) {
            s = __fadd_rn(s, __fmul_rn(codes.rotation[static_cast<std::size_t>(t) * codes.d + k], centroid[t]));
        }
    }
    out[e] = __fadd_rn(codes.anchors[static_cast<std::size_t>(assignments[i]) * codes.d + k], s);
}

}  // namespace

DeviceProductCodes::DeviceProductCodes(const Matrix& anchors, const ProductCodes& codes, cudaStream_t stream)
    : anchors_(upload(anchors.data, stream)),
      rotation_(upload(codes.book.rotation.data, stream)),
      centroids_(upload(codes.book.centroids.data, stream)),
      bounds_(upload(codes.book.bounds, stream)),
      codes_(upload(codes.codes, stream)) {
    view_.anchors = anchors_.data();
    view_.rotation = rotation_.data();
    view_.centroids = centroids_.data();
    view_.bounds = bounds_.data();
    view_.codes = codes_.data();
    view_.d = static_cast<int>(anchors.cols);
    view_.p = static_cast<int>(codes.book.coded_dims());
    view_.subspaces = static_cast<int>(codes.book.subspaces());
    view_.bits = static_cast<int>(codes.book.bits);
    view_.code_bytes = static_cast<int>(codes.book.code_bytes());
}

void launch_decode_product(const ProductView& codes, const std::uint32_t* assignments, std::size_t first,
                           std::size_t count, float* out, cudaStream_t stream) {
    const std::size_t values = count * static_cast<std::size_t>(codes.d);
    if (values == 0) {
        return;
    }
    decode_product_kernel<<<static_cast<unsigned>(ceil_div(values, kThreads)), kThreads, 0, stream>>>(
        codes, assignments, first, values, out);
    check_launch("decode_product_kernel", stream);
}

}  // namespace vlattice::cuda
