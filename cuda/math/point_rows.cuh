// The points as the device holds them: float32 rows, or (--storage f16|bf16) 16-bit rows of the
// points scaled by 2^exponent and padded to a stride, which are also the tensor cores' operands.
// Every kernel that reads points reads them through this view; a stored value times `unscale`
// (2^-exponent, exact) is the point's coordinate as the host rounded it.
#pragma once

#include "math/warp_math.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace vlattice::cuda {

enum class RowType { f32, f16, bf16 };

// Values that one 16-byte load of a stored row holds.
__host__ __device__ constexpr int values_per_load(RowType type) { return type == RowType::f32 ? 4 : 8; }
template <RowType kType>
constexpr int kValuesPerLoad = values_per_load(kType);

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

    // The 16 bytes of a row from coordinate k on (only where loads_by_16() and k is a multiple of
    // kValuesPerLoad<kType>), to be turned into coordinates by unpack: a caller may put several such
    // loads in flight before it converts any of them.
    template <RowType kType>
    __device__ __forceinline__ uint4 load_16(std::size_t row, int k) const {
        const std::size_t e = row * static_cast<std::size_t>(stride) + k;
        return __ldg(reinterpret_cast<const uint4*>(static_cast<const char*>(data) +
                                                    e * (kType == RowType::f32 ? 4 : 2)));
    }
    template <RowType kType>
    __device__ __forceinline__ void unpack(const uint4& raw, float (&out)[kValuesPerLoad<kType>]) const {
        const unsigned words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            if constexpr (kType == RowType::f32) {
                out[q] = __uint_as_float(words[q]);
            } else {
                const auto low = static_cast<unsigned short>(words[q] & 0xffffu);
                const auto high = static_cast<unsigned short>(words[q] >> 16);
                if constexpr (kType == RowType::f16) {
                    out[2 * q] = __half2float(__ushort_as_half(low)) * unscale;
                    out[2 * q + 1] = __half2float(__ushort_as_half(high)) * unscale;
                } else {
                    out[2 * q] = __bfloat162float(__ushort_as_bfloat16(low)) * unscale;
                    out[2 * q + 1] = __bfloat162float(__ushort_as_bfloat16(high)) * unscale;
                }
            }
        }
    }

    // Coordinates k .. k + kCount - 1 of a row: one value, or kValuesPerLoad<kType> of them with one
    // 16-byte load (only where loads_by_16() and k is a multiple of kCount; values past d are the
    // row's padding, for the caller to drop).
    template <RowType kType, int kCount>
    __device__ __forceinline__ void load(std::size_t row, int k, float (&out)[kCount]) const {
        if constexpr (kCount == 1) {
            out[0] = at<kType>(row, k);
        } else {
            static_assert(kCount == kValuesPerLoad<kType>, "one 16-byte load");
            unpack<kType>(load_16<kType>(row, k), out);
        }
    }

    // Whether every row starts on 16 bytes, so that load<kType, kValuesPerLoad<kType>> may be used.
    bool loads_by_16() const {
        return stride % values_per_load(type) == 0 && reinterpret_cast<std::uintptr_t>(data) % 16 == 0;
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

// Calls launch(std::integral_constant<RowType, t>{}) for the rows' type t, so that a kernel templated
// on the type reads its coordinates without a branch each.
template <class Launch>
void with_row_type(RowType type, Launch launch) {
    switch (type) {
    case RowType::f32:
        launch(std::integral_constant<RowType, RowType::f32>{});
        break;
    case RowType::f16:
        launch(std::integral_constant<RowType, RowType::f16>{});
        break;
    default:
        launch(std::integral_constant<RowType, RowType::bf16>{});
        break;
    }
}

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
