#include "search/device_codes.cuh"

#include "runtime/cuda_check.hpp"

#include <limits>
#include <string>
#include <vector>

namespace vlattice::cuda {

namespace {

template <typename T, typename Allocator>
void upload(DeviceBuffer<T>& to, const std::vector<T, Allocator>& from, cudaStream_t stream) {
    to = DeviceBuffer<T>(from.size());
    CUDA_CHECK(cudaMemcpyAsync(to.data(), from.data(), to.bytes(), cudaMemcpyHostToDevice, stream));
}

}  // namespace

DeviceCodes::DeviceCodes(const Matrix& anchors, const ResidualCodes& codes, cudaStream_t stream) {
    if (anchors.cols > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
        throw Error("anchors of dimension " + std::to_string(anchors.cols) + " exceed the GPU's limit of 2^31 - 1");
    }
    upload(anchors_, anchors.data, stream);
    view_.anchors = anchors_.data();
    view_.d = static_cast<int>(anchors.cols);
    std::vector<CodeField> fields;
    if (!codes.empty()) {
        fields.resize(anchors.cols);
        for (std::size_t k = 0; k < fields.size(); ++k) {
            fields[k].byte = codes.layout.byte[k];
            fields[k].shift = codes.layout.shift[k];
            fields[k].mask = static_cast<std::uint16_t>((1u << codes.layout.bits[k]) - 1u);
        }
        upload(offset_, codes.offset.data, stream);
        upload(step_, codes.step.data, stream);
        upload(codes_, codes.codes, stream);
        upload(fields_, fields, stream);
        view_.offset = offset_.data();
        view_.step = step_.data();
        view_.codes = codes_.data();
        view_.fields = fields_.data();
        view_.code_bytes = codes.layout.code_bytes;
        view_.has_codes = true;
    }
    // The copies read `fields`, which goes on return.
    CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace vlattice::cuda
