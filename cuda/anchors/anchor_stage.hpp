// The anchors on the device: their float32 rows, and how far each has moved since the points'
// distances were taken, which bounds the single product's window.
#pragma once

#include "points/point_stage.hpp"
#include "runtime/device_buffer.hpp"
#include "runtime/pinned_staging.hpp"

#include "vlattice/types.hpp"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace vlattice::cuda {

// An anchor's move since the last assign when it was replaced: the distances to it bound nothing.
constexpr float kReplaced = std::numeric_limits<float>::infinity();

class AnchorStage {
public:
    // The device memory of m anchors of dimension d.
    void add_footprint(Footprint& need, std::size_t m, std::size_t d);
    void allocate(std::size_t m, std::size_t d);
    void release();
    std::size_t m() const { return m_; }  // the anchors the buffers hold

    // Throws Error unless `anchors` is a whole matrix of 1 to 2^31 - 1 rows of d values.
    static void check(const Matrix& anchors, std::size_t d);
    // Every anchor, or the listed ones (below m, else Error), from the host; each counts as replaced.
    // The caller waits for the stream before it changes `anchors`.
    void upload(const Matrix& anchors, cudaStream_t stream);
    void upload_rows(const Matrix& values, const std::vector<std::uint32_t>& rows, cudaStream_t stream);
    Matrix download(cudaStream_t stream);
    Matrix download_rows(const std::vector<std::uint32_t>& rows, cudaStream_t stream);
    // `count` device rows of d floats to `host`, through pinned memory; returns once they are there.
    void copy_rows_down(const float* rows, std::size_t count, float* host, cudaStream_t stream);

    // Each anchor moves by eta towards its kept members' mean (an anchor that kept none stays).
    void queue_update(const double* means, const std::uint32_t* kept, double eta, cudaStream_t stream);
    // Every anchor counts as replaced: the last assign bounds nothing.
    void queue_forget_prior(cudaStream_t stream);
    // The points' distances are to the anchors as they are now.
    void queue_settled(cudaStream_t stream);

    float* data() { return rows_.data(); }
    const float* moved() const { return moved_.data(); }

private:
    int dim() const { return static_cast<int>(d_); }

    // The buffers sized by the anchors, with their element counts: the list that the footprint, the
    // allocation and the release all read.
    template <class Each>
    void buffers(std::size_t m, std::size_t d, Each&& each) {
        each(rows_, m * d);
        each(moved_, m);
        each(row_staging_, m * d);
        each(row_ids_, m);
    }

    std::size_t m_ = 0;
    std::size_t d_ = 0;
    DeviceBuffer<float> rows_;
    // How far each anchor has moved since the points' distances were taken, at most (kReplaced: no bound).
    DeviceBuffer<float> moved_;
    DeviceBuffer<float> row_staging_;  // rows on their way up or down, at most m at a time
    DeviceBuffer<std::uint32_t> row_ids_;
    PinnedStaging<float> host_staging_;
};

}  // namespace vlattice::cuda
