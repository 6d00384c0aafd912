// reconstruct_cuda (include/vlattice/cuda_search.hpp): rows decoded on the device in chunks, each
// chunk's download overlapping the copy of the one before into the result.
#include "vlattice/cuda_search.hpp"

#include "vlattice/codec.hpp"

#include "codes/product_scan.hpp"
#include "runtime/device_buffer.hpp"
#include "runtime/select_gpu.hpp"
#include "runtime/stream.hpp"
#include "search/decode_product.cuh"
#include "search/decode_rows.cuh"
#include "search/device_codes.cuh"
#include "search/device_product.cuh"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>

namespace vlattice {

namespace {

// Values per chunk: large enough for full transfer speed, small enough to pin cheaply.
constexpr std::size_t kChunkValues = std::size_t{4} << 20;

}  // namespace

Matrix reconstruct_cuda(const VlatFile& file, int gpu) {
    check_compressed_set(file);
    cuda::select_gpu(gpu);
    Matrix out(file.n, file.d);
    if (out.data.empty()) {
        return out;
    }
    const std::size_t n = file.n;
    const std::size_t d = file.d;
    cuda::Stream stream;
    const cudaStream_t s = stream.get();
    // One of the two holds the codes: the scalar decoder's, or the product decoder's.
    const bool product = file.codec == ResidualCodec::product;
    const cuda::DeviceCodes codes(file.anchors, product ? ResidualCodes{} : file.residuals, s);
    std::optional<cuda::DeviceProduct> product_codes;
    if (product) {
        product_codes.emplace(file, product_scan(file), s);
    }
    cuda::DeviceBuffer<std::uint32_t> assignments(n);
    CUDA_CHECK(cudaMemcpyAsync(assignments.data(), file.assignments.data(), assignments.bytes(),
                               cudaMemcpyHostToDevice, s));

    const std::size_t rows = std::min(n, std::max<std::size_t>(1, kChunkValues / d));
    cuda::DeviceBuffer<float> decoded(rows * d);
    cuda::PinnedBuffer<float> staging(2 * rows * d);
    cuda::Event downloaded[2];
    // Chunk c is decoded and downloaded into staging half c % 2 while the host copies chunk c - 1 out
    // of the other half.
    const std::size_t chunks = (n + rows - 1) / rows;
    for (std::size_t c = 0; c <= chunks; ++c) {
        if (c < chunks) {
            const std::size_t first = c * rows;
            const std::size_t count = std::min(rows, n - first);
            if (product_codes) {
                cuda::launch_decode_product(product_codes->view(), codes.view().anchors, static_cast<int>(d), first, count,
                                            decoded.data(), s);
            } else {
                cuda::launch_decode_rows(codes.view(), assignments.data(), first, count, decoded.data(), s);
            }
            CUDA_CHECK(cudaMemcpyAsync(staging.data() + (c % 2) * rows * d, decoded.data(), count * d * sizeof(float),
                                       cudaMemcpyDeviceToHost, s));
            downloaded[c % 2].record(s);
        }
        if (c > 0) {
            const std::size_t done = c - 1;
            const std::size_t first = done * rows;
            const std::size_t count = std::min(rows, n - first);
            downloaded[done % 2].synchronize();
            std::memcpy(out.row(first), staging.data() + (done % 2) * rows * d, count * d * sizeof(float));
        }
    }
    return out;
}

}  // namespace vlattice
