// Rows of floats rewritten as tensor-core operands in a 16-bit type: each value scaled by 2^exponent
// (exact) and written as a head, its rounding to the 16-bit type, plus optionally a tail, the rounding
// of what the head left out. Head + tail hold about twice the type's precision, which is what lets
// a few half-precision products stand in for one float32 product (fast_assign_half.cu).
// The rows are padded with zeros to a stride that is a multiple of 8, so that every row starts
// 16-byte aligned for cp.async and the padding adds nothing to the dot products.
#pragma once

#include "math/point_rows.cuh"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace vlattice::cuda {

enum class HalfType { f16, bf16 };

__host__ __device__ inline int half_stride(int d) { return (d + 7) / 8 * 8; }

// Bits of the flags word that launch_split_rows ORs in (the caller zeroes it).
constexpr unsigned kHalfOverflow = 1u;  // some scaled value is beyond the type's range
constexpr unsigned kHalfInexact = 2u;   // some value needs a tail (it is not exact in the type)

struct SplitArgs {
    const float* rows = nullptr;  // count x d
    std::size_t count = 0;
    int d = 0;
    int exponent = 0;
    HalfType type = HalfType::f16;
    std::uint16_t* head = nullptr;  // count x half_stride(d)
    std::uint16_t* tail = nullptr;  // count x half_stride(d), or null: then only the flags say what a tail would hold
    unsigned* flags = nullptr;
};

void launch_split_rows(const SplitArgs& args, cudaStream_t stream);

// What the heads of launch_split_rows left out, per row, for the single product's window
// (single_window.cuh): the squared norm of the head and the norm of row - head, unscaled, each summed
// in double and rounded up to float; and optionally the largest of each.
struct HeadNormArgs {
    PointRows rows;  // the rows that were split
    const std::uint16_t* head = nullptr;
    std::size_t count = 0;
    int d = 0;
    int exponent = 0;
    HalfType type = HalfType::f16;
    float* head_norms = nullptr;  // count, or null
    float* roundings = nullptr;   // count, or null
    unsigned* maxima = nullptr;   // 2 float bits, zeroed by the caller, or null
};

void launch_head_norms(const HeadNormArgs& args, cudaStream_t stream);

// An assign's anchor operands in one launch: launch_split_rows(split), then each row's float32
// squared norm into norms (its largest's bits into max_norm_bits, zeroed by the caller) as
// launch_squared_norms gives it, then launch_head_norms(heads); split and heads name the same rows.
void launch_anchor_operands(const SplitArgs& split, const HeadNormArgs& heads, float* norms, unsigned* max_norm_bits,
                            cudaStream_t stream);

}  // namespace vlattice::cuda
