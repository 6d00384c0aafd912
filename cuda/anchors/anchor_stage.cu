#include "anchors/anchor_stage.hpp"

#include "anchors/anchor_rows.cuh"
#include "math/point_rows.cuh"
#include "runtime/cuda_check.hpp"

#include "vlattice/backend.hpp"

#include <algorithm>

namespace vlattice::cuda {

void AnchorStage::check(const Matrix& anchors, std::size_t d) {
    if (anchors.rows == 0 || anchors.cols != d || anchors.data.size() != anchors.rows * anchors.cols) {
        throw Error("cuda backend: anchors are " + std::to_string(anchors.rows) + " x " + std::to_string(anchors.cols) +
                    ", expected at least one row of " + std::to_string(d));
    }
    if (anchors.rows >= kMaxRows) {
        throw Error("cuda backend: " + std::to_string(anchors.rows) + " anchors exceed the limit of 2^31");
    }
}

void AnchorStage::add_footprint(Footprint& need, std::size_t m, std::size_t d) { buffers(m, d, need); }

void AnchorStage::allocate(std::size_t m, std::size_t d) {
    release();
    buffers(m, d, AllocateBuffers{});
    host_staging_.reserve(m * d);
    m_ = m;
    d_ = d;
}

void AnchorStage::release() {
    buffers(0, 0, ReleaseBuffers{});
    host_staging_.release();
    m_ = 0;
    d_ = 0;
}

void AnchorStage::upload(const Matrix& anchors, cudaStream_t stream) {
    CUDA_CHECK(cudaMemcpyAsync(rows_.data(), anchors.data.data(), rows_.bytes(), cudaMemcpyHostToDevice, stream));
    queue_forget_prior(stream);
}

// Staged and scattered into place on the device, at most m at a time.
void AnchorStage::upload_rows(const Matrix& values, const std::vector<std::uint32_t>& rows, cudaStream_t stream) {
    if (values.cols != d_ || values.rows != rows.size()) {
        throw Error("cuda backend: upload_anchor_rows got " + std::to_string(values.rows) + " rows of " +
                    std::to_string(values.cols) + " values for " + std::to_string(rows.size()) + " listed rows of " +
                    std::to_string(d_));
    }
    require_rows_below(rows, m_, "cuda", "upload_anchor_rows");
    for (std::size_t start = 0; start < rows.size(); start += m_) {
        const std::size_t count = std::min(m_, rows.size() - start);
        CUDA_CHECK(cudaMemcpyAsync(row_staging_.data(), values.row(start), count * d_ * sizeof(float),
                                   cudaMemcpyHostToDevice, stream));
        CUDA_CHECK(cudaMemcpyAsync(row_ids_.data(), rows.data() + start, count * sizeof(std::uint32_t),
                                   cudaMemcpyHostToDevice, stream));
        launch_scatter_rows(rows_.data(), row_staging_.data(), row_ids_.data(), count, dim(), stream);
        launch_fill_listed(moved_.data(), row_ids_.data(), count, kReplaced, stream);
        CUDA_CHECK(cudaStreamSynchronize(stream));
    }
}

Matrix AnchorStage::download(cudaStream_t stream) {
    Matrix out(m_, d_);
    copy_rows_down(rows_.data(), m_, out.data.data(), stream);
    return out;
}

// Gathered on the device, at most m at a time, so that only the listed rows travel.
Matrix AnchorStage::download_rows(const std::vector<std::uint32_t>& rows, cudaStream_t stream) {
    require_rows_below(rows, m_, "cuda", "download_anchor_rows");
    Matrix out(rows.size(), d_);
    for (std::size_t start = 0; start < rows.size(); start += m_) {
        const std::size_t count = std::min(m_, rows.size() - start);
        CUDA_CHECK(cudaMemcpyAsync(row_ids_.data(), rows.data() + start, count * sizeof(std::uint32_t),
                                   cudaMemcpyHostToDevice, stream));
        launch_gather_rows(PointRows::floats(rows_.data(), dim()), row_ids_.data(), count, dim(), row_staging_.data(),
                           stream);
        copy_rows_down(row_staging_.data(), count, out.row(start), stream);
    }
    return out;
}

void AnchorStage::copy_rows_down(const float* rows, std::size_t count, float* host, cudaStream_t stream) {
    host_staging_.copy_down(rows, count * d_, host, stream);
}

void AnchorStage::queue_update(const double* means, const std::uint32_t* kept, double eta, cudaStream_t stream) {
    launch_update(rows_.data(), means, kept, m_, dim(), eta, moved_.data(), stream);
}

void AnchorStage::queue_forget_prior(cudaStream_t stream) { launch_fill(moved_.data(), m_, kReplaced, stream); }

void AnchorStage::queue_settled(cudaStream_t stream) {
    CUDA_CHECK(cudaMemsetAsync(moved_.data(), 0, moved_.bytes(), stream));
}

}  // namespace vlattice::cuda
