#include "math/half_operands.cuh"

#include "math/warp_math.cuh"
#include "runtime/cuda_check.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>

namespace vlattice::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kGroup = 8;  // values per thread: one 16-byte store of each output

template <HalfType kType>
__device__ __forceinline__ std::uint16_t round_to(float value) {
    if constexpr (kType == HalfType::f16) {
        return __half_as_ushort(__float2half_rn(value));
    } else {
        return __bfloat16_as_ushort(__float2bfloat16_rn(value));
    }
}

template <HalfType kType>
__device__ __forceinline__ float widen(std::uint16_t bits) {
    if constexpr (kType == HalfType::f16) {
        return __half2float(__ushort_as_half(bits));
    } else {
        return __bfloat162float(__ushort_as_bfloat16(bits));
    }
}

// Eight 16-bit values as one 16-byte word, lowest address first.
__device__ __forceinline__ uint4 pack(const std::uint16_t (&v)[8]) {
    return make_uint4(v[0] | (unsigned{v[1]} << 16), v[2] | (unsigned{v[3]} << 16), v[4] | (unsigned{v[5]} << 16),
                      v[6] | (unsigned{v[7]} << 16));
}

// Values k0 .. k0 + 7 of a row of d floats, scaled, as 16-bit heads and tails (16-byte stores at
// `out`); returns the flags they raise.
template <HalfType kType>
__device__ __forceinline__ unsigned split_group(const float* in, int d, int k0, float scale, std::uint16_t* head_out,
                                                std::uint16_t* tail_out) {
    unsigned flags = 0;
    std::uint16_t head[kGroup];
    std::uint16_t tail[kGroup];
#pragma unroll
    for (int e = 0; e < kGroup; ++e) {
        const int k = k0 + e;
        // Powers of two scale exactly, and a float minus its own rounding is exact.
        const float value = k < d ? in[k] * scale : 0.0f;
        head[e] = round_to<kType>(value);
        const float head_value = widen<kType>(head[e]);
        const float rest = value - head_value;
        tail[e] = round_to<kType>(rest);
        flags |= isinf(head_value) ? kHalfOverflow : 0u;
        flags |= rest != 0.0f ? kHalfInexact : 0u;
    }
    *reinterpret_cast<uint4*>(head_out) = pack(head);
    if (tail_out != nullptr) {
        *reinterpret_cast<uint4*>(tail_out) = pack(tail);
    }
    return flags;
}

// One atomic per warp at most: flags are rare, and the common case touches nothing.
__device__ __forceinline__ void raise_flags(unsigned* to, unsigned flags) {
    const unsigned warp_flags = __reduce_or_sync(kFullMask, flags);
    if (warp_flags != 0 && threadIdx.x % kWarp == 0) {
        atomicOr(to, warp_flags);
    }
}

template <HalfType kType>
__global__ void __launch_bounds__(kThreads) split_rows_kernel(SplitArgs a, float scale) {
    const int stride = half_stride(a.d);
    const int groups = stride / kGroup;
    const std::size_t item = static_cast<std::size_t>(blockIdx.x) * kThreads + threadIdx.x;
    const std::size_t row = item / groups;
    unsigned flags = 0;
    // No early return: the whole warp takes part in the flag reduction below.
    if (row < a.count) {
        const int k0 = static_cast<int>(item % groups) * kGroup;
        const std::size_t out = row * stride + k0;
        flags = split_group<kType>(a.rows + row * a.d, a.d, k0, scale, a.head + out,
                                   a.tail != nullptr ? a.tail + out : nullptr);
    }
    raise_flags(a.flags, flags);
}

constexpr int kNormThreads = 256;

// Lane 0's part of a head-norm row: the head's squared norm and the norm of row - head, rounded up.
__device__ __forceinline__ void head_norms_of(const HeadNormArgs& a, const PointRows& heads, std::size_t row, int lane) {
    const double head_norm = warp_squared_norm(PointRow{heads, row}, a.d, lane);
    double rounding[1];
    const PointRow from[1] = {PointRow{a.rows, row}};
    const PointRow to[1] = {PointRow{heads, row}};
    warp_squared_distances<1>(from, to, a.d, lane, rounding);
    if (lane != 0) {
        return;
    }
    const float norm_up = __double2float_ru(head_norm);
    const float rounding_up = __double2float_ru(sqrt(rounding[0]));
    if (a.head_norms != nullptr) {
        a.head_norms[row] = norm_up;
    }
    if (a.roundings != nullptr) {
        a.roundings[row] = rounding_up;
    }
    // Both are >= 0, and the bits of non-negative floats order like the floats.
    if (a.maxima != nullptr) {
        atomicMax(&a.maxima[0], __float_as_uint(norm_up));
        atomicMax(&a.maxima[1], __float_as_uint(rounding_up));
    }
}

// A warp per row.
__global__ void __launch_bounds__(kNormThreads) head_norms_kernel(HeadNormArgs a, PointRows heads) {
    const int lane = threadIdx.x % kWarp;
    const std::size_t row = (static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
    if (row >= a.count) {
        return;
    }
    head_norms_of(a, heads, row, lane);
}

// split_rows_kernel, then the squared norms (as squared_norms_kernel) and head_norms_kernel, a warp
// per row: the same groups, lanes and sums, so the same bits, in one launch instead of three.
template <HalfType kType>
__global__ void __launch_bounds__(kNormThreads) anchor_operands_kernel(SplitArgs a, float scale, HeadNormArgs h,
                                                                       PointRows heads, float* norms,
                                                                       unsigned* max_norm_bits) {
    const int lane = threadIdx.x % kWarp;
    const std::size_t row = (static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
    unsigned flags = 0;
    if (row < a.count) {
        const int stride = half_stride(a.d);
        for (int k0 = lane * kGroup; k0 < stride; k0 += kWarp * kGroup) {
            const std::size_t out = row * stride + k0;
            flags |= split_group<kType>(a.rows + row * a.d, a.d, k0, scale, a.head + out,
                                        a.tail != nullptr ? a.tail + out : nullptr);
        }
    }
    raise_flags(a.flags, flags);
    if (row >= a.count) {
        return;
    }
    // The other lanes' heads are read back below.
    __syncwarp();
    const float norm = static_cast<float>(warp_squared_norm(PointRow{h.rows, row}, a.d, lane));
    if (lane == 0) {
        norms[row] = norm;
        atomicMax(max_norm_bits, __float_as_uint(norm));
    }
    head_norms_of(h, heads, row, lane);
}

PointRows head_rows(const HeadNormArgs& a) {
    return PointRows{a.head, a.type == HalfType::f16 ? RowType::f16 : RowType::bf16, half_stride(a.d),
                     std::ldexp(1.0f, -a.exponent)};
}

}  // namespace

void launch_head_norms(const HeadNormArgs& a, cudaStream_t stream) {
    if (a.count == 0) {
        return;
    }
    const auto blocks = static_cast<unsigned>(ceil_div(a.count, kNormThreads / kWarp));
    head_norms_kernel<<<blocks, kNormThreads, 0, stream>>>(a, head_rows(a));
    check_launch("head_norms_kernel", stream);
}

void launch_split_rows(const SplitArgs& a, cudaStream_t stream) {
    if (a.count == 0) {
        return;
    }
    const std::size_t items = a.count * static_cast<std::size_t>(half_stride(a.d) / kGroup);
    const auto blocks = static_cast<unsigned>(ceil_div(items, kThreads));
    const float scale = std::ldexp(1.0f, a.exponent);
    if (a.type == HalfType::f16) {
        split_rows_kernel<HalfType::f16><<<blocks, kThreads, 0, stream>>>(a, scale);
    } else {
        split_rows_kernel<HalfType::bf16><<<blocks, kThreads, 0, stream>>>(a, scale);
    }
    check_launch("split_rows_kernel", stream);
}

void launch_anchor_operands(const SplitArgs& split, const HeadNormArgs& heads, float* norms, unsigned* max_norm_bits,
                            cudaStream_t stream) {
    if (split.count == 0) {
        return;
    }
    const auto blocks = static_cast<unsigned>(ceil_div(split.count, kNormThreads / kWarp));
    const float scale = std::ldexp(1.0f, split.exponent);
    if (split.type == HalfType::f16) {
        anchor_operands_kernel<HalfType::f16>
            <<<blocks, kNormThreads, 0, stream>>>(split, scale, heads, head_rows(heads), norms, max_norm_bits);
    } else {
        anchor_operands_kernel<HalfType::bf16>
            <<<blocks, kNormThreads, 0, stream>>>(split, scale, heads, head_rows(heads), norms, max_norm_bits);
    }
    check_launch("anchor_operands_kernel", stream);
}

}  // namespace vlattice::cuda
