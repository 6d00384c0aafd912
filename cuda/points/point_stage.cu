#include "points/point_stage.hpp"

#include "runtime/cuda_check.hpp"

#include <limits>

namespace vlattice::cuda {

std::string describe_plan(const PointPlan& plan, StoredType type, int gpu) {
    const std::string device = "GPU " + std::to_string(gpu);
    if (plan.tile_rows == 0) {
        return "held on " + device;
    }
    const std::string rows = std::string(stored_type_name(type)) + " rows";
    const std::string tiles = " in tiles of " + std::to_string(plan.tile_rows) + " rows";
    return plan.source == TileSource::device ? rows + " kept on " + device + ", widened" + tiles
                                             : rows + " streamed from the host" + tiles;
}

void PointStage::check(const PointView& points) {
    const std::string shape = std::to_string(points.rows) + " x " + std::to_string(points.cols);
    if (points.rows == 0 || points.cols == 0) {
        throw Error("cuda backend: no points to upload (" + shape + ")");
    }
    if (points.rows >= kMaxRows || points.cols > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
        throw Error("cuda backend: " + shape + " points exceed the backend's limit of 2^31 rows");
    }
    if (points.matrix() != nullptr && points.matrix()->data.size() != points.rows * points.cols) {
        throw Error("cuda backend: point matrix holds " + std::to_string(points.matrix()->data.size()) +
                    " values, not " + std::to_string(points.rows * points.cols));
    }
}

void PointStage::add_footprint(Footprint& need, std::size_t n, std::size_t d, StoredType type, PointStorage storage,
                               const PointPlan& plan) {
    if (plan.tile_rows > 0) {
        PointTiles::add_footprint(need, n, plan.tile_rows, d, type, storage, plan.source);
    } else {
        DevicePoints::add_footprint(need, n, d, storage);
    }
    buffers(n, need);
}

bool PointStage::holds(std::size_t n, std::size_t d, PointStorage storage, const PointPlan& plan) const {
    return plan.tile_rows == 0 && plan_.tile_rows == 0 && assignment_.size() == n && d_ == d && points_.storage() == storage;
}

void PointStage::allocate(std::size_t n, std::size_t d, const PointPlan& plan) {
    release();
    buffers(n, AllocateBuffers{});
    d_ = d;
    plan_ = plan;
}

void PointStage::release() {
    points_.release();
    tiles_.release();
    host_ = PointView();
    buffers(0, ReleaseBuffers{});
    n_ = 0;
    d_ = 0;
    plan_ = PointPlan();
}

void PointStage::upload(const PointView& points, const PointFormat& format, cudaStream_t stream) {
    n_ = 0;
    if (streamed()) {
        tiles_.load(points, format, plan_.tile_rows, plan_.source, stream);
    } else {
        points_.upload(points, format, stream);
    }
    host_ = points;
    CUDA_CHECK(cudaMemsetAsync(assignment_.data(), 0xff, assignment_.bytes(), stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    n_ = points.rows;
}

void PointStage::each_pass(cudaStream_t stream, const PointTiles::Visit& visit) {
    if (streamed()) {
        tiles_.each(stream, visit);
    } else {
        visit(0, n_, points_);
    }
}

std::vector<std::uint32_t> PointStage::download_assignment(cudaStream_t stream) const {
    std::vector<std::uint32_t> out(n_);
    CUDA_CHECK(cudaMemcpyAsync(out.data(), assignment_.data(), n_ * sizeof(std::uint32_t), cudaMemcpyDeviceToHost,
                               stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    return out;
}

std::vector<double> PointStage::download_distance(cudaStream_t stream) const {
    std::vector<double> out(n_);
    CUDA_CHECK(cudaMemcpyAsync(out.data(), distance_.data(), n_ * sizeof(double), cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    return out;
}

void PointStage::queue_take(const float* anchors, const std::uint32_t* chosen, unsigned long long* changed,
                            std::size_t first, std::size_t rows, const DevicePoints& tile, cudaStream_t stream) {
    PointDistanceArgs args;
    args.points = tile.rows();
    args.anchors = anchors;
    args.n = rows;
    args.d = d();
    args.source = chosen;
    args.assignment = assignment_.data() + first;
    args.changed = changed;
    args.distance = distance_.data() + first;
    args.block_sums = block_sums_.data() + first / kPointsPerDistanceBlock;
    launch_point_distances(args, stream);
}

void PointStage::queue_block_sums(const float* anchors, cudaStream_t stream) {
    each_pass(stream, [&](std::size_t first, std::size_t rows, const DevicePoints& tile) {
        PointDistanceArgs args;
        args.points = tile.rows();
        args.anchors = anchors;
        args.n = rows;
        args.d = d();
        args.source = assignment_.data() + first;
        args.block_sums = block_sums_.data() + first / kPointsPerDistanceBlock;
        launch_point_distances(args, stream);
    });
}

void PointStage::queue_energy_sum(cudaStream_t stream) {
    launch_sum(block_sums_.data(), block_sums_.size(), energy_sum_.data(), sum_temp_.data(), sum_temp_.bytes(), stream);
    CUDA_CHECK(cudaMemcpyAsync(host_energy_sum_.data(), energy_sum_.data(), sizeof(double), cudaMemcpyDeviceToHost,
                               stream));
}

}  // namespace vlattice::cuda
