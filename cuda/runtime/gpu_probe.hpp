// Whether a CUDA GPU can run this build's kernels. Plain C++ interface: callers never see CUDA
// headers.
#pragma once

#include <string>

namespace vlattice::cuda {

struct GpuProbe {
    bool usable = false;
    // "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB, hopper kernels)": the kernels --kernel auto takes; or
    // why none is usable.
    std::string description;
};

// Never throws: a missing driver (cudaErrorInsufficientDriver, as on machines without a GPU) and a
// missing device both come back as usable = false with the reason.
GpuProbe probe_gpu(int index);
// The CUDA devices present; 0 where there is no driver or none. Never throws.
int gpu_count();

}  // namespace vlattice::cuda
