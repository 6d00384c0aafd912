// The points of a run on the device and what each carries from one call to the next: its anchor, its
// distance to that anchor, and the per-block sums of those distances that the energy adds up. The
// points themselves are either held (DevicePoints) or made a tile per pass (PointTiles) from their
// stored rows, kept on the device or on the host; what each point carries stays on the device
// either way, and every pass over the points goes through each_pass, which gives the held points as
// one tile.
#pragma once

#include "points/device_points.hpp"
#include "points/point_distance.cuh"
#include "points/point_tiles.hpp"
#include "runtime/device_buffer.hpp"

#include "vlattice/point_format.hpp"
#include "vlattice/point_set.hpp"
#include "vlattice/types.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <functional>
#include <cstdint>
#include <string>
#include <vector>

namespace vlattice::cuda {

// Point ids, segment offsets and chunk counts are 32-bit on the device.
constexpr std::size_t kMaxRows = std::size_t{1} << 31;

// How a run's points are on the device: held whole (tile_rows 0), or in tiles of tile_rows rows
// made each pass from the stored rows at `source`.
struct PointPlan {
    std::size_t tile_rows = 0;
    TileSource source = TileSource::host;
};

// Where `plan` puts points of `type` on GPU `gpu`, in words: "held on GPU 0", "uint8 rows kept on
// GPU 0, widened in tiles of N rows", "uint8 rows streamed from the host in tiles of N rows".
std::string describe_plan(const PointPlan& plan, StoredType type, int gpu);

class PointStage {
public:
    // Throws Error unless `points` are 1 to 2^31 - 1 whole rows the kernels can take.
    static void check(const PointView& points);

    // The device memory of n x d points stored as `type` in `storage` and of their state, as `plan`
    // places them.
    void add_footprint(Footprint& need, std::size_t n, std::size_t d, StoredType type, PointStorage storage,
                       const PointPlan& plan);
    // Buffers for n x d points in `storage`, held, are there (the points themselves may not be).
    bool holds(std::size_t n, std::size_t d, PointStorage storage, const PointPlan& plan) const;
    void allocate(std::size_t n, std::size_t d, const PointPlan& plan);
    void release();

    // Replaces the points (rounded to `format`) and sets every point's anchor to none. Returns once
    // they are on the device, or, when streamed, once a pass has checked them; streamed points must
    // then outlive the run. The buffers must be of their shape (holds).
    void upload(const PointView& points, const PointFormat& format, cudaStream_t stream);

    std::size_t n() const { return n_; }  // 0 until an upload has succeeded
    int d() const { return static_cast<int>(d_); }
    // Whether the points are made a tile per pass (from either source) rather than held.
    bool streamed() const { return plan_.tile_rows > 0; }
    const PointPlan& plan() const { return plan_; }
    // The most points one tile of each_pass holds: n when they are held.
    std::size_t pass_rows() const { return streamed() ? plan_.tile_rows : n_; }
    // The points' format as the kernels see it (the held points, or the last tile).
    const DevicePoints& points() const { return streamed() ? tiles_.tile() : points_; }
    // The uploaded points on the host, for what a streamed run does there.
    const PointView& host_points() const { return host_; }
    // Calls visit(first, rows, tile) for the points in tiles of at most pass_rows(), in order, each
    // on the device when visit queues its work on `stream`.
    void each_pass(cudaStream_t stream, const PointTiles::Visit& visit);
    std::uint32_t* assignment() { return assignment_.data(); }
    const std::uint32_t* assignment() const { return assignment_.data(); }
    std::vector<std::uint32_t> download_assignment(cudaStream_t stream) const;
    double* distance() { return distance_.data(); }
    std::vector<double> download_distance(cudaStream_t stream) const;

    // Each point of the tile of `rows` points from `first` takes its anchor from `chosen` (the tile's),
    // counting the changes into *changed (zeroed by the caller), with its distance to it; and the
    // blocks' sums of those distances.
    void queue_take(const float* anchors, const std::uint32_t* chosen, unsigned long long* changed, std::size_t first,
                    std::size_t rows, const DevicePoints& tile, cudaStream_t stream);
    // The blocks' sums of the distances to the points' anchors, changing nothing else.
    void queue_block_sums(const float* anchors, cudaStream_t stream);
    // The blocks' sums added up on the device, on their way to energy_sum().
    void queue_energy_sum(cudaStream_t stream);
    // The sum of the last queue_energy_sum, once the stream has run up to it.
    double energy_sum() const { return host_energy_sum_[0]; }
    // The blocks' sums themselves: distance_block_count(n()) of them, block b of rows 64 b on.
    const double* block_sums() const { return block_sums_.data(); }

private:
    // The buffers sized by the points, with their element counts for n points: the list that the
    // footprint, the allocation and the release all read.
    template <class Each>
    void buffers(std::size_t n, Each&& each) {
        each(assignment_, n);
        each(distance_, n);
        each(block_sums_, distance_block_count(n));
        each(sum_temp_, std::max<std::size_t>(sum_temp_bytes(distance_block_count(n)), 1));
    }

    DevicePoints points_;
    PointTiles tiles_;
    PointView host_;
    PointPlan plan_;
    std::size_t n_ = 0;
    std::size_t d_ = 0;
    DeviceBuffer<std::uint32_t> assignment_;
    DeviceBuffer<double> distance_;
    DeviceBuffer<double> block_sums_;
    DeviceBuffer<unsigned char> sum_temp_;  // CUB's, for the energy sum
    DeviceBuffer<double> energy_sum_{1};
    PinnedBuffer<double> host_energy_sum_{1};
};

}  // namespace vlattice::cuda
