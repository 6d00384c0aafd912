// The launch of the kernels that need more than the default dynamic shared memory, or clusters.
#pragma once

#include "cuda_check.hpp"

#include <cuda_runtime.h>

#include <cstddef>

namespace vlattice::cuda {

// kernel<<<grid, threads, shared_bytes, stream>>>(args...), in clusters of `cluster` blocks along x
// when cluster > 1, checked under `name`. More than the default 48 KiB of dynamic shared memory
// needs the kernel's consent on the current device, which is asked first.
template <class... Params, class... Args>
void launch_kernel_ex(void (*kernel)(Params...), const char* name, dim3 grid, unsigned threads, std::size_t shared_bytes,
                      unsigned cluster, cudaStream_t stream, const Args&... args) {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared_bytes)));
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
