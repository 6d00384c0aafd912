// How much shared memory the kernels may give a block on a device.
#pragma once

#include "runtime/cuda_check.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <string>

namespace vlattice::cuda {

// The shared memory a block may opt into on `device`, or less where the environment's
// VLATTICE_BLOCK_SHARED_MEMORY (bytes) says so: tests on a large GPU then take the layouts of GPUs
// that give a block less (99 KiB on sm_86, sm_89 and sm_120). Throws Error for a value that is not a
// whole number of bytes.
inline std::size_t block_shared_memory(int device) {
    int bytes = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    const auto limit = static_cast<std::size_t>(bytes);
    const char* cap = std::getenv("VLATTICE_BLOCK_SHARED_MEMORY");
    if (cap == nullptr || *cap == '\0') {
        return limit;
    }
    char* end = nullptr;
    const unsigned long long value = std::strtoull(cap, &end, 10);
    if (*end != '\0' || *cap == '-') {
        throw Error(std::string("VLATTICE_BLOCK_SHARED_MEMORY: expected a number of bytes, got '") + cap + "'");
    }
    return std::min<std::size_t>(limit, static_cast<std::size_t>(value));
}

}  // namespace vlattice::cuda
