#include "runtime/gpu_probe.hpp"

#include "runtime/kernel_family.hpp"

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

namespace vlattice::cuda {

namespace {

std::string reason(cudaError_t status) {
    switch (status) {
    case cudaErrorInsufficientDriver:
        return "no CUDA driver, or one older than the CUDA " + std::to_string(CUDART_VERSION / 1000) +
               " runtime this build needs";
    case cudaErrorNoDevice:
        return "no CUDA device found";
    default:
        return std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status);
    }
}

// Does nothing; its only use is to ask the runtime whether this build's kernels have an image the
// device can run (the build targets CMAKE_CUDA_ARCHITECTURES only).
__global__ void image_probe_kernel() {}

// Load every kernel when the context is created rather than at its first launch, so that the
// first iterations of a run do not pay for it; a user's own setting wins. The probes are the first
// calls to touch the driver, which reads the variable once.
void load_kernels_eagerly() { setenv("CUDA_MODULE_LOADING", "EAGER", 0); }

}  // namespace

int gpu_count() {
    load_kernels_eagerly();
    int count = 0;
    return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

GpuProbe probe_gpu(int index) {
    load_kernels_eagerly();
    GpuProbe probe;
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
        probe.description = reason(status);
        return probe;
    }
    if (index < 0 || index >= count) {
        probe.description = "--gpu " + std::to_string(index) + " asked, but " + std::to_string(count) +
                            " CUDA device(s) are present";
        return probe;
    }
    cudaDeviceProp properties{};
    const cudaError_t got = cudaGetDeviceProperties(&properties, index);
    if (got != cudaSuccess) {
        probe.description = reason(got);
        return probe;
    }
    const std::string arch = "sm_" + std::to_string(properties.major) + std::to_string(properties.minor);
    // Kernel images are looked up on the current device: ask on `index`, then put the caller's back.
    int previous = 0;
    cudaFuncAttributes attributes{};
    cudaError_t image = cudaGetDevice(&previous);
    if (image == cudaSuccess) {
        image = cudaSetDevice(index);
    }
    GpuKernels kernels = GpuKernels::cuda_cores;
    if (image == cudaSuccess) {
        image = cudaFuncGetAttributes(&attributes, image_probe_kernel);
        if (image == cudaSuccess) {
            kernels = fastest_kernels(index);
        }
        static_cast<void>(cudaSetDevice(previous));
    }
    if (image != cudaSuccess) {
        probe.description = std::string(properties.name) + " (" + arch + ") cannot run this build's kernels (" +
                            cudaGetErrorName(image) + "); rebuild with CMAKE_CUDA_ARCHITECTURES for it";
        return probe;
    }
    char memory[32];
    std::snprintf(memory, sizeof memory, "%.1f GiB", static_cast<double>(properties.totalGlobalMem) / (1u << 30));
    probe.description = std::string(properties.name) + " (" + arch + ", " + memory + ", " +
                        gpu_kernels_name(kernels) + " kernels)";
    probe.usable = true;
    return probe;
}

}  // namespace vlattice::cuda
