// How much shared memory the kernels may give a block on a device.
#pragma once

#include "runtime/cuda_check.hpp"
#include "runtime/environment_cap.hpp"

#include <cuda_runtime.h>

#include <cstddef>

namespace vlattice::cuda {

// The shared memory a block may opt into on `device`, or less where the environment's
// VLATTICE_BLOCK_SHARED_MEMORY (bytes) says so: tests on a large GPU then take the layouts of GPUs
// that give a block less (99 KiB on sm_86, sm_89 and sm_120). Throws Error for a value that is not a
// whole number of bytes.
inline std::size_t block_shared_memory(int device) {
    int bytes = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    return environment_cap("VLATTICE_BLOCK_SHARED_MEMORY", static_cast<std::size_t>(bytes));
}

}  // namespace vlattice::cuda
