// The exact assign of a run (assign.cuh) in two captured graphs: the shortlist (the anchors' operands
// and the fast kernel), then, once the host has looked at how many points need repair, the finish
// (the repair in double, each point's new anchor and distance, the energy). Between them a
// single-product run narrows its all-anchor points, or moves to split products for good.
#pragma once

#include "anchors/anchor_stage.hpp"
#include "assign/anchor_operands.hpp"
#include "assign/assign.cuh"
#include "points/point_stage.hpp"
#include "runtime/device_buffer.hpp"
#include "runtime/graph.hpp"

#include "vlattice/backend.hpp"
#include "vlattice/cuda_backend.hpp"
#include "vlattice/device.hpp"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <optional>

namespace vlattice::cuda {

inline TensorEngine tensor_engine(GpuKernels kernels) {
    return kernels == GpuKernels::hopper ? TensorEngine::wgmma : TensorEngine::mma_sync;
}

class AssignStage {
public:
    // `kernels` resolved (never automatic).
    AssignStage(FastKernel kernel, GpuKernels kernels, const GpuShape& gpu)
        : kernel_(kernel), kernels_(kernels), gpu_(gpu) {}

    // The device memory sized by the points, and by the anchors for n points of dimension d.
    void add_point_footprint(Footprint& need, std::size_t n);
    void allocate_points(std::size_t n);
    void add_anchor_footprint(Footprint& need, std::size_t n, std::size_t m, int d);
    void allocate_anchors(std::size_t n, std::size_t m, int d);
    void release_anchors();
    void release();

    // The anchors' operands, made afresh by every assign: the nearest anchors (NearestStage) use them too.
    AnchorOperands& operands() { return operands_; }

    // The narrowing's buffers (launch_narrow). Their size depends on how many points the assign
    // leaves uncertain of every anchor, which no shape tells, so they are not part of the
    // footprint: they grow on demand within half of the GPU's free memory, for all such points at
    // once or, where those do not fit, for batches of them; an assign that cannot spare even a batch
    // takes the split pass over every point instead (the same anchors, exactly).
    struct NarrowScratch {
        DeviceBuffer<std::uint32_t> list;
        DeviceBuffer<std::uint32_t> ids;
        DeviceBuffer<float> norms;
        DeviceBuffer<std::uint16_t> head;
        DeviceBuffer<std::uint16_t> tail;
        DeviceBuffer<Candidate> candidates;

        // Buffers for batches of `count` points out of `total`, or none where the GPU cannot spare
        // them (nor `spare` bytes hold them).
        std::optional<NarrowBuffers> reserve(std::size_t total, std::size_t count, std::size_t stride,
                                             std::size_t candidate_count, bool tails, std::size_t spare);
    };

    // The most the narrowing's buffers may take besides the footprints (--gpu-memory's remainder).
    void limit_scratch(std::size_t spare) { spare_ = spare; }
    // New points: the run starts again on the first fast path.
    void restart();
    // The first iteration's graphs, captured while the device does something else. `generation`
    // changes whenever a buffer the graphs name is replaced.
    void prepare(PointStage& points, AnchorStage& anchors, bool repair, std::uint64_t generation, cudaStream_t stream);
    // Every point's anchor, exactly (with `repair`), and the mean squared distance, held points in
    // the captured graphs, streamed ones tile by tile. Returns once done.
    AssignStats run(PointStage& points, AnchorStage& anchors, bool repair, std::uint64_t generation,
                    cudaStream_t stream);

private:
    // What crosses the bus per assign, pinned so that the copies can sit in the graphs.
    struct HostScalars {
        unsigned long long changed;
        unsigned uncertain_counts[2];
    };

    // The buffers sized by the points, and those sized by the anchors, with their element counts:
    // the lists that the footprints, the allocations and the releases read.
    template <class Each>
    void point_buffers(std::size_t n, Each&& each) {
        each(chosen_, n);
        each(uncertain_, n);
    }
    template <class Each>
    void anchor_buffers(std::size_t n, const AssignPlan& plan, Each&& each) {
        each(candidates_, static_cast<std::size_t>(plan.splits) * n);
    }

    // The points one pass works on: all held ones, or a streamed tile.
    struct Tile {
        std::size_t first;
        std::size_t rows;
        const DevicePoints* points;
    };
    static Tile whole(const PointStage& points);

    std::uint64_t key(std::uint64_t generation, bool repair) const;
    AssignArgs args(PointStage& points, AnchorStage& anchors, const Tile& tile, bool repair);
    AssignStats run_streamed(PointStage& points, AnchorStage& anchors, bool repair, cudaStream_t stream);
    bool needs_split_pass(PointStage& points, AnchorStage& anchors, const Tile& tile, bool repair,
                          cudaStream_t stream);
    void queue_operands(PointStage& points, AnchorStage& anchors, cudaStream_t stream);
    void queue_shortlist(PointStage& points, AnchorStage& anchors, const Tile& tile, bool repair, cudaStream_t stream);
    void queue_tile_shortlist(PointStage& points, AnchorStage& anchors, const Tile& tile, bool repair,
                              cudaStream_t stream);
    void queue_finish(PointStage& points, AnchorStage& anchors, const Tile& tile, bool repair, cudaStream_t stream);
    void queue_tile_finish(PointStage& points, AnchorStage& anchors, const Tile& tile, bool repair,
                           cudaStream_t stream);
    bool narrow(PointStage& points, AnchorStage& anchors, const Tile& tile, std::size_t count, cudaStream_t stream);

    FastKernel kernel_;
    GpuKernels kernels_;
    GpuShape gpu_;
    FastPath path_ = FastPath::half_single;
    AssignPlan plan_;
    CachedGraph shortlist_graph_;
    CachedGraph finish_graph_;
    DeviceBuffer<std::uint32_t> chosen_;     // n: the exact argmin
    DeviceBuffer<std::uint32_t> uncertain_;  // n
    DeviceBuffer<Candidate> candidates_;     // plan.splits x n
    AnchorOperands operands_;
    DeviceBuffer<unsigned> uncertain_counts_{2};
    DeviceBuffer<unsigned long long> changed_{1};
    NarrowScratch narrow_scratch_;
    std::size_t spare_ = static_cast<std::size_t>(-1);
    PinnedBuffer<HostScalars> host_{1};
};

}  // namespace vlattice::cuda
