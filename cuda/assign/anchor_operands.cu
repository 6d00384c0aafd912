#include "assign/anchor_operands.hpp"

#include "math/half_operands.cuh"
#include "math/point_rows.cuh"
#include "runtime/cuda_check.hpp"

#include <limits>
#include <vector>

namespace vlattice::cuda {

namespace {

// Values [m, size) of `norms` set to +inf.
void pad_with_infinity(DeviceBuffer<float>& norms, std::size_t m) {
    const std::vector<float> padding(norms.size() - m, std::numeric_limits<float>::infinity());
    CUDA_CHECK(cudaMemcpy(norms.data() + m, padding.data(), padding.size() * sizeof(float), cudaMemcpyHostToDevice));
}

}  // namespace

void AnchorOperands::allocate(std::size_t m, std::size_t d) {
    release();
    buffers(m, d, AllocateBuffers{});
    pad_with_infinity(norms_, m);
    pad_with_infinity(head_norms_, m);
}

void AnchorOperands::queue(const float* rows, std::size_t m, int d, HalfType type, int exponent, cudaStream_t stream) {
    CUDA_CHECK(cudaMemsetAsync(max_norm_bits_.data(), 0, max_norm_bits_.bytes(), stream));
    CUDA_CHECK(cudaMemsetAsync(flags_.data(), 0, flags_.bytes(), stream));
    CUDA_CHECK(cudaMemsetAsync(head_maxima_.data(), 0, head_maxima_.bytes(), stream));
    SplitArgs split;
    split.rows = rows;
    split.count = m;
    split.d = d;
    split.exponent = exponent;
    split.type = type;
    split.head = head_.data();
    split.tail = tail_.data();
    split.flags = flags_.data();
    HeadNormArgs heads;
    heads.rows = PointRows::floats(rows, d);
    heads.head = head_.data();
    heads.count = m;
    heads.d = d;
    heads.exponent = exponent;
    heads.type = type;
    heads.head_norms = head_norms_.data();
    heads.maxima = head_maxima_.data();
    launch_anchor_operands(split, heads, norms_.data(), max_norm_bits_.data(), stream);
}

HalfOperands AnchorOperands::half(HalfType type, int exponent) const {
    HalfOperands half;
    half.type = type;
    half.exponent = exponent;
    half.anchor_head = head_.data();
    half.anchor_tail = tail_.data();
    half.anchor_flags = flags_.data();
    half.anchor_head_norms = head_norms_.data();
    half.anchor_head_maxima = head_maxima_.data();
    return half;
}

}  // namespace vlattice::cuda
