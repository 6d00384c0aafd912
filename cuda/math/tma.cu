#include "math/tma.cuh"

#include "runtime/cuda_check.hpp"

#include <cudaTypedefs.h>

#include <string>

namespace vlattice::cuda {

namespace {

// The driver's encoder, through the runtime (the build links no libcuda), looked up once.
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
    static const PFN_cuTensorMapEncodeTiled_v12000 encoder = [] {
        void* function = nullptr;
        cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
        CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &function, 12000, cudaEnableDefault,
                                                    &found));
        if (found != cudaDriverEntryPointSuccess || function == nullptr) {
            throw Error("CUDA error: the driver has no cuTensorMapEncodeTiled (it needs CUDA 12 or later)");
        }
        return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(function);
    }();
    return encoder;
}

}  // namespace

CUtensorMap row_box_map(const std::uint16_t* rows, std::size_t count, int stride, int box_rows, const char* what) {
    CUtensorMap map{};
    const cuuint64_t dims[2] = {static_cast<cuuint64_t>(stride), static_cast<cuuint64_t>(count)};
    const cuuint64_t row_bytes[1] = {static_cast<cuuint64_t>(stride) * sizeof(std::uint16_t)};
    const cuuint32_t box[2] = {kBoxValues, static_cast<cuuint32_t>(box_rows)};
    const cuuint32_t steps[2] = {1, 1};
    const CUresult result = tensor_map_encoder()(
        &map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, const_cast<std::uint16_t*>(rows), dims, row_bytes, box, steps,
        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (result != CUDA_SUCCESS) {
        throw Error(std::string("CUDA error: cuTensorMapEncodeTiled for the ") + what + " (" + std::to_string(count) +
                    " rows of stride " + std::to_string(stride) + ", boxes of " + std::to_string(box_rows) +
                    " rows) returned " + std::to_string(static_cast<int>(result)));
    }
    return map;
}

}  // namespace vlattice::cuda
