// The skip rule of every GPU test: run only where a GPU is usable, and say why not otherwise.
#pragma once

#include "../cuda/runtime/gpu_probe.hpp"

#include <catch2/catch.hpp>

namespace vlattice::test {

inline bool gpu_usable() {
    const cuda::GpuProbe probe = cuda::probe_gpu(0);
    if (!probe.usable) {
        WARN("skipped: no usable GPU: " << probe.description);
    }
    return probe.usable;
}

}  // namespace vlattice::test
