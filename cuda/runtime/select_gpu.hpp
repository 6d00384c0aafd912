// Choosing the GPU for the decoder and the search, which run without a backend.
#pragma once

#include "runtime/cuda_check.hpp"
#include "runtime/gpu_probe.hpp"

#include <string>

namespace vlattice::cuda {

// Makes `gpu` the calling thread's current device; throws Error saying why when it cannot be used
// (no driver, no such device, no kernel image for it).
inline void select_gpu(int gpu) {
    const GpuProbe probe = probe_gpu(gpu);
    if (!probe.usable) {
        throw Error("GPU " + std::to_string(gpu) + " cannot be used: " + probe.description);
    }
    CUDA_CHECK(cudaSetDevice(gpu));
}

}  // namespace vlattice::cuda
