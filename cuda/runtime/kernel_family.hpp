// Which kernels the CUDA backend runs on a GPU (--kernel, or VLATTICE_KERNEL): Hopper's (wgmma,
// the tensor memory accelerator, clusters: sm_90 with a build for 90a), the portable tensor-core
// ones (mma.sync, every GPU since Ampere), or CUDA cores alone (float32 FMAs). Every family keeps
// the same exactness contract, so all give the same assignments; only the share of points that the
// double re-score looks at, and the time, differ. Plain C++ interface.
#pragma once

#include "vlattice/device.hpp"

namespace vlattice::cuda {

// `requested`, with automatic replaced by VLATTICE_KERNEL when that is set, then by the fastest
// family GPU `gpu` has. Throws Error naming the GPU when it cannot run a forced family (hopper on
// anything but sm_90 or without 90a code in this build, portable before sm_80) or when
// VLATTICE_KERNEL names none.
GpuKernels resolve_kernels(GpuKernels requested, int gpu);

// The family `automatic` takes on GPU `gpu`, ignoring VLATTICE_KERNEL; never throws (cuda_cores when
// the GPU cannot be asked).
GpuKernels fastest_kernels(int gpu);

}  // namespace vlattice::cuda
