// A captured sequence of stream work replayed with one launch, for the backend calls of every
// iteration: their dozens of small kernels and copies would otherwise each cost a launch, which is
// what bounds the speed of small problems. The capture is redone whenever the key changes (new
// buffers, another kernel choice); values that change every iteration reach the graph through
// memory it copies from (pinned host memory), never as baked-in arguments.
#pragma once

#include "cuda_check.hpp"

#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

namespace vlattice::cuda {

class CachedGraph {
public:
    CachedGraph() = default;
    ~CachedGraph() { reset(); }
    CachedGraph(const CachedGraph&) = delete;
    CachedGraph& operator=(const CachedGraph&) = delete;

    // Runs what `work` queues on `stream`: as the graph captured for `key`, captured now if the key
    // is new. Under VLATTICE_CUDA_SYNC=1, which synchronises after every launch (not allowed while
    // capturing), the work runs directly.
    template <class Work>
    void run(cudaStream_t stream, std::uint64_t key, Work&& work) {
        if (sync_after_launch()) {
            work();
            return;
        }
        if (exec_ == nullptr || key != key_) {
            capture(stream, std::forward<Work>(work));
            key_ = key;
        }
        CUDA_CHECK(cudaGraphLaunch(exec_, stream));
    }

    void reset() {
        if (exec_ != nullptr) {
            cudaGraphExecDestroy(exec_);
            exec_ = nullptr;
        }
    }

private:
    template <class Work>
    void capture(cudaStream_t stream, Work&& work) {
        reset();
        // Relaxed: the work may query the device (CUB does) or set kernel attributes while capturing.
        CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
        try {
            work();
        } catch (...) {
            cudaGraph_t partial = nullptr;
            if (cudaStreamEndCapture(stream, &partial) == cudaSuccess && partial != nullptr) {
                cudaGraphDestroy(partial);
            }
            throw;
        }
        cudaGraph_t graph = nullptr;
        CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
        const cudaError_t made = cudaGraphInstantiate(&exec_, graph, 0);
        cudaGraphDestroy(graph);
        CUDA_CHECK(made);
    }

    cudaGraphExec_t exec_ = nullptr;
    std::uint64_t key_ = 0;
};

}  // namespace vlattice::cuda
