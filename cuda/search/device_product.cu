#include "search/device_product.cuh"

#include "runtime/cuda_check.hpp"

#include <vector>

namespace vlattice::cuda {

namespace {

template <typename T, typename Allocator>
const T* upload(DeviceBuffer<T>& to, const std::vector<T, Allocator>& from, cudaStream_t stream) {
    to = DeviceBuffer<T>(from.size());
    CUDA_CHECK(cudaMemcpyAsync(to.data(), from.data(), to.bytes(), cudaMemcpyHostToDevice, stream));
    return to.data();
}

}  // namespace

DeviceProduct::DeviceProduct(const VlatFile& file, const ProductScan& scan, cudaStream_t stream) {
    const ProductCodebook& book = file.product.book;
    std::vector<std::uint32_t> positions(scan.lists.members.size());
    for (std::size_t p = 0; p < positions.size(); ++p) {
        positions[scan.lists.members[p]] = static_cast<std::uint32_t>(p);
    }
    view_.codes = upload(codes_, scan.codes, stream);
    view_.extra = upload(extra_, scan.extra, stream);
    view_.rotation = upload(rotation_, book.rotation.data, stream);
    view_.centroids = upload(centroids_, book.centroids.data, stream);
    view_.bounds = upload(bounds_, book.bounds, stream);
    view_.assignments = upload(assignments_, file.assignments, stream);
    view_.positions = upload(positions_, positions, stream);
    view_.p = static_cast<int>(book.coded_dims());
    view_.subspaces = static_cast<int>(book.subspaces());
    view_.stages = static_cast<int>(book.stages);
    view_.code_count = static_cast<int>(book.codes());
    view_.bits = static_cast<int>(book.bits);
    view_.unit_count = static_cast<int>(scan.units.count);
    view_.unit_values = static_cast<int>(scan.units.values);
    view_.unit_width = static_cast<int>(scan.units.width);
    view_.active = true;
    // The copies read `positions`, which goes on return.
    CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace vlattice::cuda
