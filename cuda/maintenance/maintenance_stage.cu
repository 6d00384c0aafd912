#include "maintenance/maintenance_stage.hpp"

#include "maintenance/gather_members.cuh"
#include "math/warp_math.cuh"
#include "runtime/cuda_check.hpp"

#include <algorithm>
#include <cstring>

namespace vlattice::cuda {

void MaintenanceStage::add_anchor_footprint(Footprint& need, std::size_t n, std::size_t m, std::size_t d) {
    anchor_buffers(m, need);
    split_anchor_buffers(ceil_div(m, std::size_t{8}), d, need);
    split_row_buffers(std::min(n, gather_floats_ / d), need);
}

void MaintenanceStage::allocate_anchors(std::size_t n, std::size_t m, std::size_t d) {
    release();
    anchor_buffers(m, AllocateBuffers{});
    split_anchor_buffers(ceil_div(m, std::size_t{8}), d, AllocateBuffers{});
    split_row_buffers(std::min(n, gather_floats_ / d), AllocateBuffers{});
    host_rows_.reserve(ceil_div(m, std::size_t{8}) * 2 * d);  // the centres of a pass's 2-means
}

void MaintenanceStage::release() {
    anchor_buffers(0, ReleaseBuffers{});
    split_anchor_buffers(0, 0, ReleaseBuffers{});
    split_row_buffers(0, ReleaseBuffers{});
    gathered_ = {};
    host_rows_.release();
}

std::vector<Matrix> MaintenanceStage::gather(const PointStage& points, const SortSpace& sort, std::size_t m,
                                             const std::vector<std::uint32_t>& anchors, std::size_t limit,
                                             cudaStream_t stream) {
    const std::size_t d = static_cast<std::size_t>(points.d());
    std::vector<Matrix> out;
    out.reserve(anchors.size());
    for_batches(anchors, m, [&](const std::uint32_t* listed, std::size_t count) {
        for_pieces(points, sort, m, listed, count, limit, stream, [&](const Piece& piece) {
            const std::size_t values = (piece.kept[piece.last] - piece.kept[piece.first]) * d;
            const float* rows = host_rows_.fetch(gathered_.data(), values, stream);
            for (std::size_t t = piece.first; t < piece.last; ++t) {
                Matrix members(piece.kept[t + 1] - piece.kept[t], d);
                std::memcpy(members.data.data(), rows + (piece.kept[t] - piece.kept[piece.first]) * d,
                            members.data.size() * sizeof(float));
                out.push_back(std::move(members));
            }
        });
    });
    return out;
}

// A host copy of 256 members of 600 anchors at d = 768 took 0.37 s on the H100 machine; split where
// they lie, only two centres and two sums per anchor come back.
std::vector<MemberSplit> MaintenanceStage::split(const PointStage& points, const SortSpace& sort, std::size_t m,
                                                 const std::vector<std::uint32_t>& anchors, std::size_t limit,
                                                 cudaStream_t stream) {
    const std::size_t d = static_cast<std::size_t>(points.d());
    std::vector<MemberSplit> out;
    out.reserve(anchors.size());
    for_batches(anchors, m, [&](const std::uint32_t* listed, std::size_t count) {
        split_anchor_buffers(count, d, GrowBuffers{});
        const auto split_piece = [&](const Piece& piece) {
            const std::size_t rows = piece.kept[piece.last] - piece.kept[piece.first];
            split_row_buffers(rows, GrowBuffers{});
            TwoMeansArgs args;
            args.rows = gathered_.data();
            args.offsets = kept_offsets_.data();
            args.first = piece.first;
            args.count = piece.last - piece.first;
            args.d = points.d();
            args.means = means_.data();
            args.centres = centres_.data();
            args.sums = sums_.data();
            args.ok = ok_.data();
            args.side_sums = side_sums_.data();
            args.counts = counts_.data();
            args.distances = distances_.data();
            args.sides = sides_.data();
            args.clusters = clusters_;
            args.shared_limit = gpu_.shared_limit;
            launch_two_means(args, stream);  // before the next piece's gather, in stream order
        };
        const std::vector<std::uint32_t> kept = for_pieces(points, sort, m, listed, count, limit, stream, split_piece);
        std::vector<double> host_sums(count * 2);
        std::vector<int> host_ok(count);
        CUDA_CHECK(cudaMemcpyAsync(host_sums.data(), sums_.data(), host_sums.size() * sizeof(double),
                                   cudaMemcpyDeviceToHost, stream));
        CUDA_CHECK(cudaMemcpyAsync(host_ok.data(), ok_.data(), host_ok.size() * sizeof(int), cudaMemcpyDeviceToHost,
                                   stream));
        // Two centres per listed anchor: 6 KB each at d = 784, too many for a pageable copy.
        const float* centres = host_rows_.fetch(centres_.data(), count * 2 * d, stream);
        for (std::size_t t = 0; t < count; ++t) {
            MemberSplit split;
            split.rows = kept[t + 1] - kept[t];
            if (host_ok[t] != 0) {
                split.ok = true;
                const float* left = centres + t * 2 * d;
                split.left.assign(left, left + d);
                split.right.assign(left + d, left + 2 * d);
                split.before = host_sums[2 * t];
                split.after = host_sums[2 * t + 1];
            }
            out.push_back(std::move(split));
        }
    });
    return out;
}

template <class Each>
void MaintenanceStage::for_batches(const std::vector<std::uint32_t>& anchors, std::size_t m, Each each) {
    for (std::size_t batch = 0; batch < anchors.size(); batch += m) {
        each(anchors.data() + batch, std::min(m, anchors.size() - batch));
    }
}

template <class Consume>
std::vector<std::uint32_t> MaintenanceStage::for_pieces(const PointStage& points, const SortSpace& sort, std::size_t m,
                                                        const std::uint32_t* anchors, std::size_t count,
                                                        std::size_t limit, cudaStream_t stream, Consume consume) {
    const std::size_t d = static_cast<std::size_t>(points.d());
    GatherArgs args;
    args.points = points.points().rows();
    args.assignment = points.assignment();
    args.n = points.n();
    args.m = m;
    args.d = points.d();
    args.listed = listed_.data();
    args.count = count;
    args.slot_of = slot_of_.data();
    for (int b = 0; b < 2; ++b) {
        args.keys[b] = sort.keys[b];
        args.members[b] = sort.members[b];
    }
    args.selected = selected_.data();
    args.temp = sort.temp;
    args.temp_bytes = sort.temp_bytes;
    args.offsets = sort.offsets;
    CUDA_CHECK(cudaMemcpyAsync(listed_.data(), anchors, count * sizeof(std::uint32_t), cudaMemcpyHostToDevice, stream));
    launch_select_listed(args, stream);
    std::int64_t selected = 0;
    CUDA_CHECK(cudaMemcpyAsync(&selected, selected_.data(), sizeof selected, cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    const std::uint32_t* grouped = launch_group_listed(args, static_cast<std::size_t>(selected), stream);
    std::vector<std::uint32_t> offsets(count + 1);
    CUDA_CHECK(cudaMemcpyAsync(offsets.data(), sort.offsets, offsets.size() * sizeof(std::uint32_t),
                               cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));

    std::vector<std::uint32_t> kept(count + 1, 0);
    for (std::size_t t = 0; t < count; ++t) {
        kept[t + 1] = kept[t] + static_cast<std::uint32_t>(std::min<std::size_t>(limit, offsets[t + 1] - offsets[t]));
    }
    CUDA_CHECK(cudaMemcpyAsync(kept_offsets_.data(), kept.data(), kept.size() * sizeof(std::uint32_t),
                               cudaMemcpyHostToDevice, stream));
    // Rows per piece; a piece holds one anchor at least, so an anchor that keeps more rows than
    // this has a piece of its own.
    const std::size_t capacity = gather_floats_ / d;
    for (std::size_t first = 0; first < count;) {
        std::size_t last = first + 1;
        while (last < count && kept[last + 1] - kept[first] <= capacity) {
            ++last;
        }
        grow_buffer(gathered_, static_cast<std::size_t>(kept[last] - kept[first]) * d);
        launch_gather_rows(args, grouped, kept_offsets_.data(), first, last - first, kept[last] - kept[first],
                           gathered_.data(), stream);
        consume(Piece{first, last, kept});
        first = last;
    }
    return kept;
}

}  // namespace vlattice::cuda
