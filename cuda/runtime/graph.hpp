// A captured sequence of stream work replayed with one launch, for the backend calls of every
// iteration: their dozens of small kernels and copies would otherwise each cost a launch, which is
// what bounds the speed of small problems. The capture is redone whenever the key changes (new
// buffers, another kernel choice); values that change every iteration reach the graph through
// memory it copies from (pinned host memory), never as baked-in arguments.
//
// A new key's work runs directly, and the graph is captured and instantiated while the device runs
// it: capture and instantiation are host work, and done first they left the device idle for most
// of a fit's first iteration (1.0-1.1 ms at Fashion-MNIST against 0.5 for the others).
#pragma once

#include "runtime/cuda_check.hpp"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <utility>

namespace vlattice::cuda {

class CachedGraph {
public:
    CachedGraph() = default;
    ~CachedGraph() { reset(); }
    CachedGraph(const CachedGraph&) = delete;
    CachedGraph& operator=(const CachedGraph&) = delete;

    // Runs what `work` queues on `stream`: as the graph captured for `key`, or directly if the key is
    // new, capturing the graph for the next calls behind it. Under VLATTICE_CUDA_SYNC=1, which
    // synchronises after every launch (not allowed while capturing), the work always runs directly.
    template <class Work>
    void run(cudaStream_t stream, std::uint64_t key, Work&& work) {
        if (sync_after_launch()) {
            work();
            return;
        }
        if (holds(key)) {
            CUDA_CHECK(cudaGraphLaunch(exec_, stream));
            return;
        }
        work();
        prepare(stream, key, work);
    }

    // Captures the graph for `key` without running the work, so that the first run() with that key
    // replays it: for work known ahead, captured while the device is busy with something else.
    template <class Work>
    void prepare(cudaStream_t stream, std::uint64_t key, Work&& work) {
        if (sync_after_launch() || holds(key)) {
            return;
        }
        capture(stream, work);
        key_ = key;
    }

    void reset() {
        if (exec_ != nullptr) {
            cudaGraphExecDestroy(exec_);
            exec_ = nullptr;
        }
    }

private:
    bool holds(std::uint64_t key) const { return exec_ != nullptr && key == key_; }

    // A graph of the same shape as the one held (new buffers or sizes, the same kernels: the next
    // sub-space fit) updates it in place, which costs a fraction of an instantiation; any other
    // replaces it.
    template <class Work>
    void capture(cudaStream_t stream, Work&& work) {
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
        std::size_t nodes = 0;
        const cudaError_t counted = cudaGraphGetNodes(graph, nullptr, &nodes);
        if (counted != cudaSuccess) {
            cudaGraphDestroy(graph);
            CUDA_CHECK(counted);
        }
        // A graph of another node count cannot update the one held; trying would only leave an error.
        if (exec_ != nullptr && nodes != nodes_) {
            reset();
        }
        nodes_ = nodes;
        if (exec_ != nullptr) {
            cudaGraphExecUpdateResultInfo result{};
            if (cudaGraphExecUpdate(exec_, graph, &result) == cudaSuccess) {
                cudaGraphDestroy(graph);
                CUDA_CHECK(cudaGraphUpload(exec_, stream));
                return;
            }
            // A refused update leaves its error behind: cleared here, it cannot surface at a later check.
            static_cast<void>(cudaGetLastError());
            reset();
        }
        const cudaError_t made = cudaGraphInstantiate(&exec_, graph, 0);
        cudaGraphDestroy(graph);
        CUDA_CHECK(made);
        // Behind the direct run, so that the first launch of the graph finds it on the device.
        CUDA_CHECK(cudaGraphUpload(exec_, stream));
    }

    cudaGraphExec_t exec_ = nullptr;
    std::size_t nodes_ = 0;  // of the graph exec_ was made or last updated from
    std::uint64_t key_ = 0;
};

}  // namespace vlattice::cuda
