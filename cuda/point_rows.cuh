// The points as the device holds them: float32 rows, or (--storage f16|bf16) 16-bit rows of the
// points scaled by 2^exponent and padded to a stride, which are also the tensor cores' operands.
// Every kernel that reads points reads them through this view; a stored value times `unscale`
// (2^-exponent, exact) is the point's coordinate as the host rounded it.
#pragma once

#include "warp_math.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>

namespace vlattice::cuda {

enum class RowType { f32, f16, bf16 };

struct PointRows {
    const void* data = nullptr;
    RowType type = RowType::f32;
    int stride = 0;  // values per stored row
    float unscale = 1.0f;

    // When the type is known at compile time: no branch per coordinate.
    template <RowType kType>
    __device__ __forceinline__ float at(std::size_t row, int k) const {
        const std::size_t e = row * static_cast<std::size_t>(stride) + k;
        if constexpr (kType == RowType::f32) {
            return static_cast<const float*>(data)[e];
        } else if constexpr (kType == RowType::f16) {
            return __half2float(static_cast<const __half*>(data)[e]) * unscale;
        } else {
            return __bfloat162float(static_cast<const __nv_bfloat16*>(data)[e]) * unscale;
        }
    }

    __device__ __forceinline__ float at(std::size_t row, int k) const {
        switch (type) {
        case RowType::f32:
            return at<RowType::f32>(row, k);
        case RowType::f16:
            return at<RowType::f16>(row, k);
        default:
            return at<RowType::bf16>(row, k);
        }
    }

    // A float32 view of rows of d floats.
    static PointRows floats(const float* rows, int d) { return {rows, RowType::f32, d, 1.0f}; }
};

// Coordinate k of point i, for the warp helpers of warp_math.cuh.
struct PointRow {
    PointRows rows;
    std::size_t i;
    __device__ __forceinline__ float operator()(int k) const { return rows.at(i, k); }
};

// The same for rows of type kType (rows.type), so that a loop over coordinates has no branch and
// its loads can be in flight together.
template <RowType kType>
struct TypedPointRow {
    PointRows rows;
    std::size_t i;
    __device__ __forceinline__ float operator()(int k) const { return rows.at<kType>(i, k); }
};

}  // namespace vlattice::cuda
