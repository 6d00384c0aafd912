#include "points/point_tiles.hpp"

#include "points/stored_rows.cuh"
#include "runtime/cuda_check.hpp"

#include <algorithm>
#include <future>

namespace vlattice::cuda {

void PointTiles::add_footprint(Footprint& need, std::size_t n, std::size_t capacity, std::size_t d, StoredType type,
                               PointStorage storage, TileSource source) {
    DevicePoints::add_tile_footprint(need, capacity, d, storage, true);
    need.add<char>((source == TileSource::device ? n : 2 * capacity) * d * stored_type_bytes(type));
}

void PointTiles::load(const PointView& points, const PointFormat& format, std::size_t capacity, TileSource source,
                      cudaStream_t stream) {
    release();
    CUDA_CHECK(cudaGetDevice(&gpu_));
    host_ = points;
    format_ = format;
    source_ = source;
    rows_ = points.rows;
    cols_ = points.cols;
    type_ = points.type();
    capacity_ = std::min(capacity, points.rows);
    row_bytes_ = points.cols * stored_type_bytes(points.type());
    if (source == TileSource::device) {
        stored_ = DeviceBuffer<char>(rows_ * row_bytes_);
    }
    for (int h = 0; h < 2; ++h) {
        pinned_[h] = PinnedBuffer<char>(capacity_ * row_bytes_);
        if (source == TileSource::host) {
            raw_[h] = DeviceBuffer<char>(capacity_ * row_bytes_);
        }
    }
    // The check pass keeps no float32 rows; its flags say whether the run's tiles must.
    tile_.reserve_tile(capacity_, points.cols, format, false);
    CUDA_CHECK(cudaMemsetAsync(flags_.data(), 0, flags_.bytes(), stream));
    pass(stream, flags_.data(), true, [](std::size_t, std::size_t, const DevicePoints&) {});
    if (source == TileSource::device) {
        // Every later pass widens the rows that stay on the device; no tile is staged again.
        for (int h = 0; h < 2; ++h) {
            pinned_[h] = {};
        }
        host_ = PointView();
    }
    unsigned flags = 0;
    CUDA_CHECK(cudaMemcpyAsync(&flags, flags_.data(), sizeof flags, cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    if (!DevicePoints::rounded_to(flags, format)) {
        release();
        DevicePoints::throw_not_rounded(format);
    }
    if ((flags & kHalfInexact) != 0) {
        tile_.reserve_tile(capacity_, points.cols, format, true);
    }
}

void PointTiles::release() {
    for (int h = 0; h < 2; ++h) {
        pinned_[h] = {};
        raw_[h] = {};
    }
    stored_ = {};
    tile_.release();
    host_ = PointView();
    rows_ = 0;
    capacity_ = 0;
}

void PointTiles::each(cudaStream_t stream, const Visit& visit) {
    CUDA_CHECK(cudaMemsetAsync(flags_.data(), 0, flags_.bytes(), stream));
    pass(stream, flags_.data(), source_ == TileSource::host, visit);
}

std::size_t PointTiles::rows_of(std::size_t t) const {
    return std::min(capacity_, rows_ - t * capacity_);
}

char* PointTiles::stored_rows(std::size_t t) {
    return source_ == TileSource::device ? stored_.data() + t * capacity_ * row_bytes_ : raw_[t % 2].data();
}

void PointTiles::stage(std::size_t t) {
    CUDA_CHECK(cudaSetDevice(gpu_));  // a thread of its own
    const std::size_t h = t % 2;
    const std::size_t rows = rows_of(t);
    landed_[h].synchronize();  // tile t - 2 has left this half
    host_.pack_rows(t * capacity_, rows, pinned_[h].data());
    consumed_[h].hold(copy_stream_.get());  // and the device has widened it
    CUDA_CHECK(cudaMemcpyAsync(stored_rows(t), pinned_[h].data(), rows * row_bytes_, cudaMemcpyHostToDevice,
                               copy_stream_.get()));
    landed_[h].record(copy_stream_.get());
}

void PointTiles::pass(cudaStream_t stream, unsigned* flags, bool staged, const Visit& visit) {
    const std::size_t tiles = (rows_ + capacity_ - 1) / capacity_;
    if (staged) {
        stage(0);
    }
    for (std::size_t t = 0; t < tiles; ++t) {
        // The next tile is copied while this one is worked on; a failure in either surfaces here,
        // and the copy is waited for before anything it uses can go.
        std::future<void> next;
        if (staged && t + 1 < tiles) {
            next = std::async(std::launch::async, [this, t] { stage(t + 1); });
        }
        const std::size_t h = t % 2;
        const std::size_t rows = rows_of(t);
        if (staged) {
            landed_[h].hold(stream);
        }
        launch_widen_stored(stored_rows(t), type_, rows * cols_, tile_.tile_landing(), stream);
        if (staged) {
            consumed_[h].record(stream);
        }
        tile_.queue_tile(rows, flags, stream);
        try {
            visit(t * capacity_, rows, tile_);
        } catch (...) {
            if (next.valid()) {
                next.wait();
            }
            throw;
        }
        if (next.valid()) {
            next.get();
        }
    }
    if (staged) {
        CUDA_CHECK(cudaStreamSynchronize(copy_stream_.get()));
    }
}

}  // namespace vlattice::cuda
