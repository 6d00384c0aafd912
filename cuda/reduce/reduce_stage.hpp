// The robust reduce of a run (robust_reduce.cuh) as a captured graph, or for streamed points tile by
// tile: each anchor's trimmed member mean, counts and variance, left on the device for the update.
// Its sorting space is sized by the points; maintenance borrows it between reduces to group the
// members of the anchors it measures. The sums are one row of d + 1 integers per anchor, held or
// streamed alike: a tile needs nothing of its own.
#pragma once

#include "anchors/anchor_stage.hpp"
#include "points/point_stage.hpp"
#include "reduce/robust_reduce.cuh"
#include "runtime/device_buffer.hpp"
#include "runtime/graph.hpp"

#include "vlattice/backend.hpp"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace vlattice::cuda {

// Scratch of a member sort: two keys and two member ids per point, m + 1 offsets, CUB's scratch.
struct SortSpace {
    std::uint32_t* keys[2] = {nullptr, nullptr};
    std::uint32_t* members[2] = {nullptr, nullptr};
    std::uint32_t* offsets = nullptr;
    void* temp = nullptr;
    std::size_t temp_bytes = 0;
};

class ReduceStage {
public:
    // The device memory sized by n points, and by m anchors of dimension d for points streamed in
    // tiles (`streamed`) or held.
    void add_point_footprint(Footprint& need, std::size_t n) { point_buffers(n, need); }
    void allocate_points(std::size_t n);
    void add_anchor_footprint(Footprint& need, std::size_t n, bool streamed, std::size_t m, std::size_t d) {
        anchor_buffers(n, streamed, m, d, need);
    }
    void allocate_anchors(std::size_t n, bool streamed, std::size_t m, std::size_t d);
    void release_anchors() { anchor_buffers(0, false, 0, 0, ReleaseBuffers{}); }
    void release();

    // The first iteration's graph (a trimming one), captured while the device does something else.
    void prepare(PointStage& points, AnchorStage& anchors, std::uint64_t generation, cudaStream_t stream);
    // Trims `trim` of the points (the farthest from their anchors) and reduces the rest. Returns once
    // done; throws if a kept member lay past its anchor's grid (a distance that is not its row's).
    void run(PointStage& points, AnchorStage& anchors, double trim, std::uint64_t generation, cudaStream_t stream);
    // The last run's counts, kept counts and variances of the m anchors.
    AnchorStats download(std::size_t m, cudaStream_t stream);
    // A reduce made elsewhere (on the host, over ranks) in place of run's: m x d means and the
    // statistics, for the update and download to read. Returns once copied.
    void take(const std::vector<double>& means, const AnchorStats& stats, cudaStream_t stream);

    const double* means() const { return means_.data(); }
    const std::uint32_t* kept() const { return kept_.data(); }
    SortSpace sort_space();

private:
    template <class Each>
    void point_buffers(std::size_t n, Each&& each) {
        for (int b = 0; b < 2; ++b) {
            each(keys_[b], n);
            each(members_[b], n);
        }
    }
    // m = 0: no anchors (the release).
    template <class Each>
    void anchor_buffers(std::size_t n, bool streamed, std::size_t m, std::size_t d, Each&& each) {
        const std::size_t per_anchor = streamed ? m : 0;
        each(offsets_, m + 1);
        each(item_counts_, m + 1);
        each(item_offsets_, m + 1);
        each(count_, m);
        each(kept_, m);
        each(variance_, m);
        each(means_, m * d);
        each(farthest_, m);
        each(grids_, 2 * m);
        each(sums_, m * d + m);
        each(first_chunk_, per_anchor);
        each(chunk_counts_, streamed ? m + 1 : 0);
        each(chunk_base_, streamed ? m + 1 : 0);
        each(temp_, m == 0 ? 0 : temp_bytes(n, m));
    }
    static std::size_t temp_bytes(std::size_t n, std::size_t m);
    void queue(PointStage& points, AnchorStage& anchors, bool trims, cudaStream_t stream);

    // Without trimming and with it: the two differ in shape (a trimming reduce sorts by distance
    // first), so that neither is captured over the other when a run's trim share reaches zero.
    CachedGraph graphs_[2];
    DeviceBuffer<std::uint32_t> keys_[2];
    DeviceBuffer<std::uint32_t> members_[2];
    DeviceBuffer<std::uint32_t> offsets_;
    DeviceBuffer<std::uint32_t> item_counts_;
    DeviceBuffer<std::uint32_t> item_offsets_;
    DeviceBuffer<std::uint32_t> count_;
    DeviceBuffer<std::uint32_t> kept_;
    DeviceBuffer<double> variance_;
    DeviceBuffer<double> means_;
    DeviceBuffer<unsigned long long> farthest_;
    DeviceBuffer<SumGrid> grids_;
    DeviceBuffer<unsigned long long> sums_;
    DeviceBuffer<std::uint32_t> first_chunk_;
    DeviceBuffer<std::uint32_t> chunk_counts_;
    DeviceBuffer<std::uint32_t> chunk_base_;
    DeviceBuffer<unsigned char> temp_;  // CUB's, for the reduce's sorts and the borrowed ones
    DeviceBuffer<double> trim_{1};
    PinnedBuffer<double> host_trim_{1};  // read by the graph when it runs
    DeviceBuffer<unsigned> stray_{1};
    PinnedBuffer<unsigned> host_stray_{1};  // written by the graph when it runs
};

}  // namespace vlattice::cuda
