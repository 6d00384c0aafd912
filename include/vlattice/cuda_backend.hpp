#pragma once

#include "vlattice/backend.hpp"
#include "vlattice/collective.hpp"
#include "vlattice/device.hpp"

#include <cstddef>
#include <memory>

namespace vlattice {

// The CUDA backend on GPU `gpu`: everything of size n stays on the device for the whole run (the
// points themselves, or their stored rows, unless they are streamed from the host), and
// every kernel and copy runs on the backend's own stream. Its results equal the CPU backend's
// (assignments exactly, sums to rounding). Defined only in builds with VLATTICE_HAVE_CUDA, so include
// and call it under that macro. Throws Error when the GPU cannot be used. Its methods make `gpu` the
// calling thread's current CUDA device.
//
// The fast half of its exact assign runs on tensor cores with half-precision operands (float16, or
// bfloat16 under bf16 storage): one product per point-anchor pair (`single`); the points that then
// need every anchor re-scored get a pass of split operands of their own (two or three products, a
// window of uncertainty as narrow as float32's), and when they are more than half the points the
// run moves to split operands for all (`split`) from then on (`automatic`). The other settings pin
// one kernel without either step, for tests and measurements; the assignments are the same. With
// GpuKernels::cuda_cores every assign runs on float32 FMAs instead, and this setting has no effect.
enum class FastKernel { automatic, single, split };

// Maintenance gathers the members of the anchors it measures in pieces of at most this many floats
// (64 MiB), or of one anchor's members where they alone are more. Tests pass fewer, so that lists
// small enough for compute-sanitizer still cross a piece's end.
constexpr std::size_t kGatherFloats = std::size_t{16} << 20;

// `kernels` picks the family of kernels (GpuKernels); throws Error when the GPU cannot run a forced
// one. `memory_limit` bounds the device memory the run's buffers take (0: what the GPU has free);
// points whose rows do not fit beside the rest are made a tile per pass, from their stored rows kept
// on the GPU or streamed from the host, with the same results as when they are held. With a `share`
// of a set's rows (total_rows > 0), the backend holds one rank's rows and gives every rank what
// one process holding them all computes, exchanging through share.ranks (row_share()).
std::unique_ptr<Backend> make_cuda_backend(int gpu = 0, FastKernel kernel = FastKernel::automatic,
                                           std::size_t gather_floats = kGatherFloats,
                                           GpuKernels kernels = GpuKernels::automatic, std::size_t memory_limit = 0,
                                           const RowShare& share = RowShare{});

}  // namespace vlattice
