// Choosing where a run executes: --device auto|cpu|cuda and --gpu N.
#pragma once

#include "vlattice/backend.hpp"

#include <memory>
#include <string>

namespace vlattice {

enum class DeviceKind { automatic, cpu, cuda };

// Throws Error for anything but "auto", "cpu" or "cuda".
DeviceKind parse_device(const std::string& name);

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

// `automatic` picks the GPU when one is usable, else the CPU with a note that says why.
// `cuda` throws Error saying why no GPU can be used (no CUDA build, no device, driver too old).
BackendChoice make_backend(DeviceKind kind, int gpu, int threads);

// For the other work with a GPU path (decoding, search): whether to take it. `automatic` takes it
// when the GPU is usable, else notes why not; `cuda` throws Error saying why no GPU can be used.
struct GpuChoice {
    bool use = false;
    std::string note;
};
GpuChoice choose_gpu(DeviceKind kind, int gpu);

}  // namespace vlattice
