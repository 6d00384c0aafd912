// Owners of a CUDA stream and of a CUDA event, for the backend's one explicit stream and the
// double-buffered uploads.
#pragma once

#include "runtime/cuda_check.hpp"

#include <cuda_runtime.h>

#include <utility>

namespace vlattice::cuda {

class Stream {
public:
    // Non-blocking: the legacy default stream, which other code in the process may use, never
    // serialises with ours.
    Stream() { CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
    ~Stream() {
        if (stream_ != nullptr) {
            cudaStreamDestroy(stream_);
        }
    }
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;
    Stream(Stream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}
    Stream& operator=(Stream&&) = delete;

    cudaStream_t get() const { return stream_; }
    void synchronize() const { CUDA_CHECK(cudaStreamSynchronize(stream_)); }

private:
    cudaStream_t stream_ = nullptr;
};

class Event {
public:
    Event() { CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming)); }
    ~Event() {
        if (event_ != nullptr) {
            cudaEventDestroy(event_);
        }
    }
    Event(const Event&) = delete;
    Event& operator=(const Event&) = delete;
    Event(Event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
    Event& operator=(Event&&) = delete;

    void record(cudaStream_t stream) { CUDA_CHECK(cudaEventRecord(event_, stream)); }
    void synchronize() const { CUDA_CHECK(cudaEventSynchronize(event_)); }
    // Work queued on `stream` from here on waits for what this event last recorded.
    void hold(cudaStream_t stream) const { CUDA_CHECK(cudaStreamWaitEvent(stream, event_, 0)); }

private:
    cudaEvent_t event_ = nullptr;
};

}  // namespace vlattice::cuda
