// The launch of the kernels that need more than the default dynamic shared memory, or clusters.
#pragma once

#include "runtime/cuda_check.hpp"

#include <cuda_runtime.h>

#include <cstddef>
#include <mutex>

namespace vlattice::cuda {

// Held while a kernel's consent to dynamic shared memory is read and raised (launch_kernel_ex).
inline std::mutex& shared_memory_consent() {
    static std::mutex lock;
    return lock;
}

// The kernel's own (static) shared memory on the current device, which its dynamic shared memory
// must leave room for within the block's limit.
template <class... Params>
std::size_t static_shared_bytes(void (*kernel)(Params...)) {
    cudaFuncAttributes attributes{};
    CUDA_CHECK(cudaFuncGetAttributes(&attributes, kernel));
    return attributes.sharedSizeBytes;
}

// kernel<<<grid, threads, shared_bytes, stream>>>(args...), in clusters of `cluster` blocks along x
// when cluster > 1, checked under `name`. More than the default 48 KiB of dynamic shared memory
// needs the kernel's consent on the current device, which is raised to shared_bytes first and never
// lowered: host threads launch the same kernel with different amounts side by side (a budget's
// candidates, each on its own sibling backend), and a consent set to each launch's own amount was
// lowered under another launch, which then failed with cudaErrorLaunchOutOfResources or
// cudaErrorInvalidValue.
template <class... Params, class... Args>
void launch_kernel_ex(void (*kernel)(Params...), const char* name, dim3 grid, unsigned threads, std::size_t shared_bytes,
                      unsigned cluster, cudaStream_t stream, const Args&... args) {
    {
        const std::lock_guard<std::mutex> held(shared_memory_consent());
        cudaFuncAttributes attributes{};
        CUDA_CHECK(cudaFuncGetAttributes(&attributes, kernel));
        if (static_cast<std::size_t>(attributes.maxDynamicSharedSizeBytes) < shared_bytes) {
            CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(shared_bytes)));
        }
    }
    cudaLaunchConfig_t config{};
    config.gridDim = grid;
    config.blockDim = dim3(threads);
    config.dynamicSmemBytes = shared_bytes;
    config.stream = stream;
    cudaLaunchAttribute clustered{};
    clustered.id = cudaLaunchAttributeClusterDimension;
    clustered.val.clusterDim.x = cluster;
    clustered.val.clusterDim.y = 1;
    clustered.val.clusterDim.z = 1;
    config.attrs = &clustered;
    config.numAttrs = cluster > 1 ? 1 : 0;
    CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, args...));
    check_launch(name, stream);
}

}  // namespace vlattice::cuda
