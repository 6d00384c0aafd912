#include "gpu_probe.hpp"

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

}  // namespace

GpuProbe probe_gpu(int index) {
    // Load every kernel when the context is created rather than at its first launch, so that the
    // first iterations of a run do not pay for it; a user's own setting wins. This call is the
    // first to touch the driver, which reads the variable once.
    setenv("CUDA_MODULE_LOADING", "EAGER", 0);
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
    char memory[32];
    std::snprintf(memory, sizeof memory, "%.1f GiB", static_cast<double>(properties.totalGlobalMem) / (1u << 30));
    probe.description = std::string(properties.name) + " (sm_" + std::to_string(properties.major) +
                        std::to_string(properties.minor) + ", " + memory + ")";
    probe.usable = true;
    return probe;
}

}  // namespace vlattice::cuda
