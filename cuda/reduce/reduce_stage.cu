#include "reduce/reduce_stage.hpp"

#include "maintenance/gather_members.cuh"
#include "reduce/robust_reduce.cuh"
#include "runtime/cuda_check.hpp"

#include <algorithm>
#include <string>

namespace vlattice::cuda {

void ReduceStage::allocate_points(std::size_t n) {
    release();
    point_buffers(n, AllocateBuffers{});
}

void ReduceStage::allocate_anchors(std::size_t n, bool streamed, std::size_t m, std::size_t d) {
    release_anchors();
    anchor_buffers(n, streamed, m, d, AllocateBuffers{});
}

void ReduceStage::release() {
    point_buffers(0, ReleaseBuffers{});
    release_anchors();
}

// CUB reports its scratch needs for given sizes; one buffer serves every sort, one at a time.
std::size_t ReduceStage::temp_bytes(std::size_t n, std::size_t m) {
    return std::max({robust_reduce_temp_bytes(n, m), gather_members_temp_bytes(n), std::size_t{1}});
}

void ReduceStage::prepare(PointStage& points, AnchorStage& anchors, std::uint64_t generation, cudaStream_t stream) {
    if (points.streamed()) {
        return;  // a streamed reduce launches tile by tile
    }
    graphs_[1].prepare(stream, generation, [&] { queue(points, anchors, true, stream); });
}

void ReduceStage::run(PointStage& points, AnchorStage& anchors, double trim, std::uint64_t generation,
                      cudaStream_t stream) {
    host_trim_[0] = trim;
    const bool trims = trims_any(trim, points.n());
    if (points.streamed()) {
        queue(points, anchors, trims, stream);
    } else {
        graphs_[trims ? 1 : 0].run(stream, generation, [&] { queue(points, anchors, trims, stream); });
    }
    CUDA_CHECK(cudaStreamSynchronize(stream));
    if (host_stray_[0] != 0) {
        throw Error("cuda backend: robust_reduce met a kept member farther from its anchor than its distance says, "
                    "or an anchor whose sums leave double's range");
    }
}

AnchorStats ReduceStage::download(std::size_t m, cudaStream_t stream) {
    AnchorStats stats;
    stats.count.resize(m);
    stats.kept.resize(m);
    stats.variance.resize(m);
    CUDA_CHECK(cudaMemcpyAsync(stats.count.data(), count_.data(), m * sizeof(std::uint32_t), cudaMemcpyDeviceToHost,
                               stream));
    CUDA_CHECK(cudaMemcpyAsync(stats.kept.data(), kept_.data(), m * sizeof(std::uint32_t), cudaMemcpyDeviceToHost,
                               stream));
    CUDA_CHECK(cudaMemcpyAsync(stats.variance.data(), variance_.data(), m * sizeof(double), cudaMemcpyDeviceToHost,
                               stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    return stats;
}

void ReduceStage::take(const std::vector<double>& means, const AnchorStats& stats, cudaStream_t stream) {
    const std::size_t m = stats.count.size();
    if (m > count_.size() || stats.kept.size() != m || stats.variance.size() != m || means.size() > means_.size() ||
        (m > 0 && means.size() % m != 0)) {
        throw Error("cuda backend: a reduce of " + std::to_string(m) + " anchors and " + std::to_string(means.size()) +
                    " mean values does not fit the reduce's buffers");
    }
    CUDA_CHECK(cudaMemcpyAsync(means_.data(), means.data(), means.size() * sizeof(double), cudaMemcpyHostToDevice,
                               stream));
    CUDA_CHECK(cudaMemcpyAsync(count_.data(), stats.count.data(), m * sizeof(std::uint32_t), cudaMemcpyHostToDevice,
                               stream));
    CUDA_CHECK(cudaMemcpyAsync(kept_.data(), stats.kept.data(), m * sizeof(std::uint32_t), cudaMemcpyHostToDevice,
                               stream));
    CUDA_CHECK(cudaMemcpyAsync(variance_.data(), stats.variance.data(), m * sizeof(double), cudaMemcpyHostToDevice,
                               stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
}

SortSpace ReduceStage::sort_space() {
    SortSpace space;
    for (int b = 0; b < 2; ++b) {
        space.keys[b] = keys_[b].data();
        space.members[b] = members_[b].data();
    }
    space.offsets = offsets_.data();
    space.temp = temp_.data();
    space.temp_bytes = temp_.bytes();
    return space;
}

// The trim share comes from host_trim_ when the work runs, so that one graph serves every temperature.
void ReduceStage::queue(PointStage& points, AnchorStage& anchors, bool trims, cudaStream_t stream) {
    CUDA_CHECK(cudaMemcpyAsync(trim_.data(), host_trim_.data(), sizeof(double), cudaMemcpyHostToDevice, stream));
    ReduceArgs args;
    args.anchors = anchors.data();
    args.distance = points.distance();
    args.assignment = points.assignment();
    args.n = points.n();
    args.m = anchors.m();
    args.d = points.d();
    args.trim = trim_.data();
    args.trims = trims;
    for (int b = 0; b < 2; ++b) {
        args.anchor_keys[b] = keys_[b].data();
        args.members[b] = members_[b].data();
    }
    args.offsets = offsets_.data();
    args.item_counts = item_counts_.data();
    args.item_offsets = item_offsets_.data();
    args.farthest = farthest_.data();
    args.grids = grids_.data();
    args.sums = sums_.data();
    args.stray = stray_.data();
    args.tiles.first_chunk = first_chunk_.data();
    args.tiles.chunk_counts = chunk_counts_.data();
    args.tiles.chunk_base = chunk_base_.data();
    args.count = count_.data();
    args.kept = kept_.data();
    args.variance = variance_.data();
    args.means = means_.data();
    args.temp = temp_.data();
    args.temp_bytes = temp_.bytes();
    host_stray_[0] = 0;
    if (args.n == 0 || args.m == 0) {
        return;
    }
    const std::uint32_t* grouped = launch_reduce_groups(args, stream);
    launch_reduce_grids(args, grouped, stream);
    if (points.streamed()) {
        points.each_pass(stream, [&](std::size_t first, std::size_t rows, const DevicePoints& tile) {
            launch_tile_sums(args, grouped, MemberTile{tile.rows(), first, rows}, stream);
        });
    } else {
        launch_member_sums(args, grouped, points.points().rows(), stream);
    }
    launch_reduce_finalize(args, stream);
    CUDA_CHECK(cudaMemcpyAsync(host_stray_.data(), stray_.data(), sizeof(unsigned), cudaMemcpyDeviceToHost, stream));
}

}  // namespace vlattice::cuda
