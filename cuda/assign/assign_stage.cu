#include "assign/assign_stage.hpp"

#include "runtime/cuda_check.hpp"
#include "runtime/environment_cap.hpp"
#include "runtime/free_memory.hpp"

#include <algorithm>

namespace vlattice::cuda {

namespace {

// The single-product path is given up for the split one when more than half of the points would
// need every anchor re-scored: narrowing them would then cost more than the split pass over all
// (one product costs 0.45 of three on the H100, at d = 128 as at 768).
constexpr std::size_t kMaxAllAnchorShare = 2;
// Batches of the narrowing, when all the points it takes do not fit at once, go down to this many
// points (64 tiles of the fast kernel); below, the split pass over every point serves instead.
constexpr std::size_t kMinNarrowBatch = 8192;

}  // namespace

void AssignStage::add_point_footprint(Footprint& need, std::size_t n) { point_buffers(n, need); }

void AssignStage::allocate_points(std::size_t n) {
    release();
    point_buffers(n, AllocateBuffers{});
}

void AssignStage::add_anchor_footprint(Footprint& need, std::size_t n, std::size_t m, int d) {
    anchor_buffers(n, plan_assign(n, m, d, gpu_), need);
    operands_.add_footprint(need, m, static_cast<std::size_t>(d));
}

void AssignStage::allocate_anchors(std::size_t n, std::size_t m, int d) {
    release_anchors();
    plan_ = plan_assign(n, m, d, gpu_);
    anchor_buffers(n, plan_, AllocateBuffers{});
    operands_.allocate(m, static_cast<std::size_t>(d));
}

// The narrowing's scratch goes too: it may hold half of what was free, which the next anchor
// count's footprint check must see.
void AssignStage::release_anchors() {
    anchor_buffers(0, AssignPlan{}, ReleaseBuffers{});
    operands_.release();
    narrow_scratch_ = {};
}

void AssignStage::release() {
    point_buffers(0, ReleaseBuffers{});
    release_anchors();
}

void AssignStage::restart() {
    if (kernels_ == GpuKernels::cuda_cores) {
        path_ = FastPath::fp32;
    } else {
        path_ = kernel_ == FastKernel::split ? FastPath::half_split : FastPath::half_single;
    }
}

void AssignStage::prepare(PointStage& points, AnchorStage& anchors, bool repair, std::uint64_t generation,
                          cudaStream_t stream) {
    if (points.streamed()) {
        return;  // a streamed assign launches tile by tile
    }
    const std::uint64_t graph_key = key(generation, repair);
    const Tile all = whole(points);
    shortlist_graph_.prepare(stream, graph_key, [&] { queue_shortlist(points, anchors, all, repair, stream); });
    finish_graph_.prepare(stream, graph_key, [&] { queue_finish(points, anchors, all, repair, stream); });
}

AssignStats AssignStage::run(PointStage& points, AnchorStage& anchors, bool repair, std::uint64_t generation,
                             cudaStream_t stream) {
    if (points.streamed()) {
        return run_streamed(points, anchors, repair, stream);
    }
    const Tile all = whole(points);
    const auto shortlist = [&] { queue_shortlist(points, anchors, all, repair, stream); };
    shortlist_graph_.run(stream, key(generation, repair), shortlist);
    CUDA_CHECK(cudaStreamSynchronize(stream));
    if (needs_split_pass(points, anchors, all, repair, stream)) {
        shortlist_graph_.run(stream, key(generation, repair), shortlist);
    }
    finish_graph_.run(stream, key(generation, repair), [&] { queue_finish(points, anchors, all, repair, stream); });
    CUDA_CHECK(cudaStreamSynchronize(stream));
    AssignStats stats;
    stats.changed = static_cast<std::size_t>(host_[0].changed);
    stats.energy = points.energy_sum() / static_cast<double>(points.n());
    return stats;
}

// The same steps as a held assign, tile by tile, without graphs: the anchors' operands once, then
// each tile's shortlist, narrowing and repair while it is on the device.
AssignStats AssignStage::run_streamed(PointStage& points, AnchorStage& anchors, bool repair, cudaStream_t stream) {
    CUDA_CHECK(cudaMemsetAsync(changed_.data(), 0, changed_.bytes(), stream));
    queue_operands(points, anchors, stream);
    points.each_pass(stream, [&](std::size_t first, std::size_t rows, const DevicePoints& rows_of_tile) {
        const Tile tile{first, rows, &rows_of_tile};
        queue_tile_shortlist(points, anchors, tile, repair, stream);
        CUDA_CHECK(cudaStreamSynchronize(stream));
        if (needs_split_pass(points, anchors, tile, repair, stream)) {
            queue_tile_shortlist(points, anchors, tile, repair, stream);
        }
        queue_tile_finish(points, anchors, tile, repair, stream);
    });
    anchors.queue_settled(stream);
    points.queue_energy_sum(stream);
    CUDA_CHECK(cudaMemcpyAsync(&host_[0].changed, changed_.data(), changed_.bytes(), cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    AssignStats stats;
    stats.changed = static_cast<std::size_t>(host_[0].changed);
    stats.energy = points.energy_sum() / static_cast<double>(points.n());
    return stats;
}

// One half-precision product leaves a window of uncertainty of the rows' rounding times the
// distance (single_window.cuh). Where anchors crowd around the points (many nearly equidistant),
// many points then need every anchor re-scored; they are narrowed (a split pass over just them,
// queued here), or when they are most of the points or the GPU cannot spare the narrowing's
// buffers, true: the shortlist is to be redone split, and the run keeps that path from then on.
bool AssignStage::needs_split_pass(PointStage& points, AnchorStage& anchors, const Tile& tile, bool repair,
                                   cudaStream_t stream) {
    const std::size_t all_anchor = host_[0].uncertain_counts[1];
    if (kernel_ == FastKernel::automatic && repair && path_ == FastPath::half_single &&
        (all_anchor > tile.rows / kMaxAllAnchorShare ||
         (worth_narrowing(all_anchor, anchors.m(), points.d()) &&
          !narrow(points, anchors, tile, all_anchor, stream)))) {
        path_ = FastPath::half_split;
        return true;
    }
    return false;
}

// What the captured graphs depend on besides their buffers.
std::uint64_t AssignStage::key(std::uint64_t generation, bool repair) const {
    return (generation << 3) | (static_cast<std::uint64_t>(path_) << 1) | (repair ? 1 : 0);
}

AssignStage::Tile AssignStage::whole(const PointStage& points) {
    return {0, points.n(), &points.points()};
}

AssignArgs AssignStage::args(PointStage& points, AnchorStage& anchors, const Tile& tile, bool repair) {
    const DevicePoints& rows = *tile.points;
    AssignArgs args;
    args.points = rows.rows();
    args.point_norms = rows.norms();
    args.anchors = anchors.data();
    args.anchor_norms = operands_.norms();
    args.max_anchor_norm_bits = operands_.max_norm_bits();
    args.n = tile.rows;
    args.m = anchors.m();
    args.d = points.d();
    args.path = path_;
    args.engine = tensor_engine(kernels_);
    args.half = operands_.half(rows.half_type(), rows.exponent());
    args.half.point_head = rows.head();
    args.half.point_tail = rows.tail();
    args.half.point_head_norms = rows.head_norms();
    args.half.point_roundings = rows.roundings();
    args.repair = repair;
    args.plan = plan_;
    args.candidates = candidates_.data();
    args.chosen = chosen_.data();
    args.uncertain = uncertain_.data();
    args.uncertain_counts = uncertain_counts_.data();
    args.gpu = gpu_;
    args.prior = {points.distance() + tile.first, points.assignment() + tile.first, anchors.moved()};
    return args;
}

// Anchors change between assigns (update, uploads), so their norms and operands are made afresh.
void AssignStage::queue_operands(PointStage& points, AnchorStage& anchors, cudaStream_t stream) {
    operands_.queue(anchors.data(), anchors.m(), points.d(), points.points().half_type(), points.points().exponent(),
                    stream);
}

void AssignStage::queue_shortlist(PointStage& points, AnchorStage& anchors, const Tile& tile, bool repair,
                                  cudaStream_t stream) {
    queue_operands(points, anchors, stream);
    queue_tile_shortlist(points, anchors, tile, repair, stream);
}

void AssignStage::queue_tile_shortlist(PointStage& points, AnchorStage& anchors, const Tile& tile, bool repair,
                                       cudaStream_t stream) {
    CUDA_CHECK(cudaMemsetAsync(uncertain_counts_.data(), 0, uncertain_counts_.bytes(), stream));
    launch_shortlist(args(points, anchors, tile, repair), stream);
    CUDA_CHECK(cudaMemcpyAsync(host_[0].uncertain_counts, uncertain_counts_.data(), uncertain_counts_.bytes(),
                               cudaMemcpyDeviceToHost, stream));
}

void AssignStage::queue_finish(PointStage& points, AnchorStage& anchors, const Tile& tile, bool repair,
                               cudaStream_t stream) {
    CUDA_CHECK(cudaMemsetAsync(changed_.data(), 0, changed_.bytes(), stream));
    queue_tile_finish(points, anchors, tile, repair, stream);
    // The distances are the current anchors': nothing has moved since them.
    anchors.queue_settled(stream);
    points.queue_energy_sum(stream);
    CUDA_CHECK(cudaMemcpyAsync(&host_[0].changed, changed_.data(), changed_.bytes(), cudaMemcpyDeviceToHost, stream));
}

void AssignStage::queue_tile_finish(PointStage& points, AnchorStage& anchors, const Tile& tile, bool repair,
                                    cudaStream_t stream) {
    launch_repair(args(points, anchors, tile, repair), stream);
    points.queue_take(anchors.data(), chosen_.data(), changed_.data(), tile.first, tile.rows, *tile.points, stream);
}

// The `count` all-anchor points of the last shortlist, narrowed, queued on the stream, all at once
// or in the largest batches the GPU can spare (halving from all of them, or from the rows that
// VLATTICE_NARROW_ROWS names for tests, down to kMinNarrowBatch); false, with nothing queued, where
// it cannot spare the smallest.
bool AssignStage::narrow(PointStage& points, AnchorStage& anchors, const Tile& tile, std::size_t count,
                         cudaStream_t stream) {
    const auto stride = static_cast<std::size_t>(half_stride(points.d()));
    const auto candidates = [&](std::size_t rows) {
        return rows == 0 ? 0 : static_cast<std::size_t>(plan_assign(rows, anchors.m(), points.d(), gpu_).splits) * rows;
    };
    const bool tails = tile.points->tail() != nullptr;
    const std::size_t largest = std::max<std::size_t>(environment_cap("VLATTICE_NARROW_ROWS", count), 1);
    for (std::size_t batch = largest; batch >= std::min(largest, kMinNarrowBatch); batch /= 2) {
        const std::size_t cells = std::max(candidates(batch), candidates(count % batch));
        const std::optional<NarrowBuffers> buffers =
            narrow_scratch_.reserve(count, batch, stride, cells, tails, spare_);
        if (buffers) {
            const AssignArgs narrowed = args(points, anchors, tile, true);
            for (std::size_t first = 0; first < count; first += batch) {
                launch_narrow(narrowed, count, first, std::min(batch, count - first), *buffers, stream);
            }
            return true;
        }
    }
    return false;
}

namespace {

// The narrowing's buffers for an all-anchor list of `total`, batches of `rows` points of `stride`
// values and `candidates` candidates.
template <class Each>
void narrow_buffers(AssignStage::NarrowScratch& s, std::size_t total, std::size_t rows, std::size_t stride,
                    std::size_t candidates, bool tails, Each&& each) {
    each(s.list, total);
    each(s.ids, rows);
    each(s.norms, rows);
    each(s.head, rows * stride);
    each(s.tail, tails ? rows * stride : 0);
    each(s.candidates, candidates);
}

}  // namespace

std::optional<NarrowBuffers> AssignStage::NarrowScratch::reserve(std::size_t total, std::size_t count,
                                                                 std::size_t stride, std::size_t candidate_count,
                                                                 bool tails, std::size_t spare) {
    const bool enough = list.size() >= total && ids.size() >= count && head.size() >= count * stride &&
                        (!tails || tail.size() >= count * stride) && candidates.size() >= candidate_count;
    if (!enough) {
        // A quarter to spare where the GPU has room for it, since the count changes from one assign
        // to the next; at least the count itself, within half of what is free, else nothing.
        *this = {};
        const std::size_t free = std::min(device_memory().free / 2, spare);
        const auto sized = [&](std::size_t spare_quarters, auto&& each) {
            narrow_buffers(*this, total + spare_quarters * total / 4, count + spare_quarters * count / 4, stride,
                           candidate_count + spare_quarters * candidate_count / 4, tails, each);
        };
        const auto bytes = [&](std::size_t spare_quarters) {
            Footprint need;
            sized(spare_quarters, need);
            return need.bytes();
        };
        if (bytes(0) > free) {
            return std::nullopt;
        }
        const std::size_t quarters = bytes(1) <= free ? 1 : 0;
        try {
            sized(quarters, AllocateBuffers{});
        } catch (const Error&) {
            // Taken since the look (another process, a sibling fit): the split pass needs none.
            *this = {};
            static_cast<void>(cudaGetLastError());
            return std::nullopt;
        }
    }
    return NarrowBuffers{list.data(), ids.data(), norms.data(), head.data(), tail.data(), candidates.data()};
}

}  // namespace vlattice::cuda
