// Choosing where a run executes: --device auto|cpu|cuda and --gpu N.
#pragma once

#include "vlattice/backend.hpp"

#include <cstddef>
#include <memory>
#include <string>

namespace vlattice {

enum class DeviceKind { automatic, cpu, cuda };

// Throws Error for anything but "auto", "cpu" or "cuda".
DeviceKind parse_device(const std::string& name);

// Which of the CUDA backend's kernels a run uses (--kernel, or the environment's VLATTICE_KERNEL
// when --kernel is auto): `automatic` takes the fastest the GPU has (hopper on sm_90, portable on
// the other GPUs since Ampere, cuda_cores before), the others force one, for tests and
// measurements. Every family gives the same assignments.
enum class GpuKernels { automatic, hopper, portable, cuda_cores };

// "auto", "hopper", "portable" or "cuda-cores"; throws Error naming `what` (the option or variable)
// for anything else.
GpuKernels parse_gpu_kernels(const std::string& name, const std::string& what = "--kernel");
const char* gpu_kernels_name(GpuKernels kernels);

struct BackendChoice {
    std::unique_ptr<Backend> backend;
    std::string note;  // one line for the user when `auto` fell back to the CPU or the CPU threads were lowered
};

struct GpuStatus {
    bool usable = false;
    std::string description;  // the GPU's name and size, or why none is usable
};

// Never throws: no CUDA build, no driver (cudaErrorInsufficientDriver) and no device all come back
// as usable = false with the reason.
GpuStatus gpu_status(int gpu);
// The CUDA devices present (0 in a build without CUDA, or without a driver). Never throws.
int gpu_count();

// `automatic` picks the GPU when one is usable, else the CPU with a note that says why.
// `cuda` throws Error saying why no GPU can be used (no CUDA build, no device, driver too old).
// `gpu_memory` bounds the GPU memory a CUDA backend's buffers take (0: what is free; make_cuda_backend).
BackendChoice make_backend(DeviceKind kind, int gpu, int threads, GpuKernels kernels = GpuKernels::automatic,
                           std::size_t gpu_memory = 0);

// For the other work with a GPU path (decoding, search): whether to take it. `automatic` takes it
// when the GPU is usable, else notes why not; `cuda` throws Error saying why no GPU can be used.
struct GpuChoice {
    bool use = false;
    std::string note;
};
GpuChoice choose_gpu(DeviceKind kind, int gpu);

}  // namespace vlattice
