// Maintenance's look at the members of listed anchors, on the device: their rows gathered for the
// host (gather_members.cuh), or split in two where they lie (two_means.cuh), so that only two
// centres and two sums per anchor come back. The members are grouped in the reduce's sorting space,
// borrowed between reduces; the rows pass through a buffer of bounded size, a piece of whole
// anchors at a time.
#pragma once

#include "assign/assign.cuh"
#include "maintenance/two_means.cuh"
#include "points/point_stage.hpp"
#include "reduce/reduce_stage.hpp"
#include "runtime/device_buffer.hpp"
#include "runtime/pinned_staging.hpp"

#include "vlattice/two_means.hpp"
#include "vlattice/types.hpp"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace vlattice::cuda {

class MaintenanceStage {
public:
    // Pieces hold at most `gather_floats` floats, or one anchor's members where they alone are more.
    // `clusters`: the 2-means runs a cluster of blocks per anchor (Hopper's kernels).
    MaintenanceStage(std::size_t gather_floats, bool clusters, const GpuShape& gpu)
        : gather_floats_(gather_floats), clusters_(clusters), gpu_(gpu) {}

    // The device memory sized by m anchors of dimension d over n points; the 2-means' comes now for
    // an eighth of the anchors at once (a pass lists fewer as a rule) and a whole piece of rows, so
    // that maintenance's first pass allocates none.
    void add_anchor_footprint(Footprint& need, std::size_t n, std::size_t m, std::size_t d);
    void allocate_anchors(std::size_t n, std::size_t m, std::size_t d);
    void release();

    // The first `limit` members of each of `anchors` (distinct; ids of m or more have none), by
    // point index, as float32 rows; or their 2-means splits.
    std::vector<Matrix> gather(const PointStage& points, const SortSpace& sort, std::size_t m,
                               const std::vector<std::uint32_t>& anchors, std::size_t limit, cudaStream_t stream);
    std::vector<MemberSplit> split(const PointStage& points, const SortSpace& sort, std::size_t m,
                                   const std::vector<std::uint32_t>& anchors, std::size_t limit, cudaStream_t stream);

private:
    // A piece of a batch's members on the device: list positions [first, last) of the batch, whose
    // kept rows (kept[t] to kept[t + 1] for position t) lie packed in gathered_ from kept[first].
    struct Piece {
        std::size_t first;
        std::size_t last;
        const std::vector<std::uint32_t>& kept;
    };

    template <class Each>
    void anchor_buffers(std::size_t m, Each&& each) {
        each(listed_, m);
        each(slot_of_, m);
        each(kept_offsets_, m + 1);
    }
    // The 2-means' buffers for `count` listed anchors, and for a piece of `rows` rows; grown on
    // demand and kept (allocating them on every call cost about 14 us a buffer, a sixth of a
    // 2-means pass at (a)).
    template <class Each>
    void split_anchor_buffers(std::size_t count, std::size_t d, Each&& each) {
        each(means_, count * d);
        each(centres_, count * 2 * d);
        each(sums_, count * 2);
        each(ok_, count);
        each(side_sums_, count * 2 * d);
        each(counts_, count * 2 * kTwoMeansBlocks);
    }
    template <class Each>
    void split_row_buffers(std::size_t rows, Each&& each) {
        each(distances_, 2 * rows);
        each(sides_, rows);
    }

    // Calls each(listed, count) on the list's batches of at most m anchors, in order.
    template <class Each>
    void for_batches(const std::vector<std::uint32_t>& anchors, std::size_t m, Each each);
    // The first `limit` members of `count` <= m listed anchors, gathered in pieces of whole anchors
    // that fit the bounded buffer; consume(piece) runs on each before the next overwrites it.
    // Returns the kept offsets.
    template <class Consume>
    std::vector<std::uint32_t> for_pieces(const PointStage& points, const SortSpace& sort, std::size_t m,
                                          const std::uint32_t* anchors, std::size_t count, std::size_t limit,
                                          cudaStream_t stream, Consume consume);

    std::size_t gather_floats_;
    bool clusters_;
    GpuShape gpu_;
    DeviceBuffer<std::uint32_t> listed_;
    DeviceBuffer<std::uint32_t> slot_of_;
    DeviceBuffer<std::uint32_t> kept_offsets_;  // packed rows per listed anchor
    DeviceBuffer<std::int64_t> selected_{1};
    DeviceBuffer<float> gathered_;  // grown on demand
    PinnedStaging<float> host_rows_;
    // The 2-means': per listed anchor the mean (d), the centres (2 d), the sums (2), whether it
    // split, the sides' sums (2 d) and counts (2 per block); per member of a piece its distances
    // (2) and side.
    DeviceBuffer<float> means_;
    DeviceBuffer<float> centres_;
    DeviceBuffer<double> sums_;
    DeviceBuffer<int> ok_;
    DeviceBuffer<double> side_sums_;
    DeviceBuffer<int> counts_;
    DeviceBuffer<float> distances_;
    DeviceBuffer<signed char> sides_;
};

}  // namespace vlattice::cuda
