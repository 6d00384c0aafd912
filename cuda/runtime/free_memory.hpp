// The current GPU's memory as the stages' checks see it. VLATTICE_GPU_MEMORY (bytes) lowers what
// counts as free, so that tests on a large GPU meet what a smaller or busier one does.
#pragma once

#include "runtime/cuda_check.hpp"
#include "runtime/environment_cap.hpp"

#include <cuda_runtime.h>

#include <cstddef>

namespace vlattice::cuda {

struct MemoryInfo {
    std::size_t free = 0;
    std::size_t total = 0;
};

inline MemoryInfo device_memory() {
    MemoryInfo info;
    CUDA_CHECK(cudaMemGetInfo(&info.free, &info.total));
    info.free = environment_cap("VLATTICE_GPU_MEMORY", info.free);
    return info;
}

}  // namespace vlattice::cuda
