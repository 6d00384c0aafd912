// Turning CUDA status codes into vlattice::Error. Every runtime call, every CUB call and every kernel
// launch of the CUDA backend goes through these, so a failure names the call that failed.
#pragma once

#include "vlattice/types.hpp"

#include <cuda_runtime.h>

#include <cstdlib>
#include <string>

namespace vlattice::cuda {

// Throws Error naming the expression, where it is, and the runtime's own words for the status.
inline void check(cudaError_t status, const char* expression, const char* file, int line) {
    if (status != cudaSuccess) {
        throw Error(std::string("CUDA error: ") + expression + " at " + file + ":" + std::to_string(line) + ": " +
                    cudaGetErrorName(status) + ": " + cudaGetErrorString(status));
    }
}

// Kernels run asynchronously, so a fault inside one surfaces at a later synchronising call and is
// reported under that call's name. VLATTICE_CUDA_SYNC=1 synchronises after every launch instead, so
// that the message names the kernel that faulted (slower; for bring-up and debugging).
inline bool sync_after_launch() {
    static const bool enabled = [] {
        const char* value = std::getenv("VLATTICE_CUDA_SYNC");
        return value != nullptr && value[0] != '\0' && value[0] != '0';
    }();
    return enabled;
}

// Call right after a launch: a bad configuration (grid, block, shared memory) is caught here.
inline void check_launch(const char* kernel, cudaStream_t stream) {
    const cudaError_t launched = cudaGetLastError();
    if (launched != cudaSuccess) {
        throw Error(std::string("CUDA error: launching ") + kernel + ": " + cudaGetErrorName(launched) + ": " +
                    cudaGetErrorString(launched));
    }
    if (sync_after_launch()) {
        const cudaError_t ran = cudaStreamSynchronize(stream);
        if (ran != cudaSuccess) {
            throw Error(std::string("CUDA error: running ") + kernel + ": " + cudaGetErrorName(ran) + ": " +
                        cudaGetErrorString(ran));
        }
    }
}

}  // namespace vlattice::cuda

#define CUDA_CHECK(call) ::vlattice::cuda::check((call), #call, __FILE__, __LINE__)
