#include "vlattice/cuda_backend.hpp"

#include "fit/init.hpp"

#include "anchors/anchor_rows.cuh"
#include "assign/assign.cuh"
#include "codes/product_encode.cuh"
#include "maintenance/gather_members.cuh"
#include "maintenance/two_means.cuh"
#include "math/half_operands.cuh"
#include "points/device_points.hpp"
#include "points/point_distance.cuh"
#include "reduce/robust_reduce.cuh"
#include "runtime/cuda_check.hpp"
#include "runtime/device_buffer.hpp"
#include "runtime/graph.hpp"
#include "runtime/kernel_family.hpp"
#include "runtime/stream.hpp"
#include "seeding/seed_anchors.cuh"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

namespace vlattice {

namespace {

using cuda::DeviceBuffer;
using cuda::Footprint;
using cuda::PinnedBuffer;

// Point ids, segment offsets and chunk counts are 32-bit on the device.
constexpr std::size_t kMaxRows = std::size_t{1} << 31;
// The single-product path is given up for the split one when more than half of the points would
// need every anchor re-scored: narrowing them would then cost more than the split pass over all
// (one product costs 0.45 of three on the H100, at d = 128 as at 768).
constexpr std::size_t kMaxAllAnchorShare = 2;
// An anchor's move since the last assign when it was replaced: the distances to it bound nothing.
constexpr float kReplaced = std::numeric_limits<float>::infinity();
// Siblings fitting side by side (product-code training): enough streams that the GPU has work while
// each fit's host steps run, few enough that their buffers stay small.
constexpr std::size_t kSiblings = 8;

cuda::FastPath first_fast_path(GpuKernels kernels, FastKernel kernel) {
    if (kernels == GpuKernels::cuda_cores) {
        return cuda::FastPath::fp32;
    }
    return kernel == FastKernel::split ? cuda::FastPath::half_split : cuda::FastPath::half_single;
}

std::string mib(std::size_t bytes) {
    return std::to_string((bytes + (std::size_t{1} << 20) - 1) >> 20) + " MiB";
}

int select_device(int gpu) {
    CUDA_CHECK(cudaSetDevice(gpu));
    return gpu;
}

// The scalars that come back from the device (or go down to it) per call, pinned so that the
// copies can sit in captured graphs.
struct HostScalars {
    unsigned long long changed;
    unsigned uncertain_counts[2];
    double energy_sum;
    double trim;
    std::int64_t selected;
};

class CudaBackend final : public Backend {
public:
    CudaBackend(int gpu, FastKernel kernel, std::size_t gather_floats, GpuKernels kernels)
        : gpu_(select_device(gpu)),
          gpu_shape_(cuda::gpu_shape(gpu)),
          kernels_(cuda::resolve_kernels(kernels, gpu)),
          kernel_(kernel),
          gather_floats_(gather_floats) {}

    // Frees the buffers on this backend's GPU, whatever device the thread uses by then, and only once
    // the work queued on its stream has run (update is never waited for). A destructor cannot report
    // a failure; after a fault the context is lost anyway.
    ~CudaBackend() override {
        static_cast<void>(cudaSetDevice(gpu_));
        static_cast<void>(cudaStreamSynchronize(stream_.get()));
    }

    CudaBackend(const CudaBackend&) = delete;
    CudaBackend& operator=(const CudaBackend&) = delete;

    const char* name() const override { return "cuda"; }

    void upload_points(const Matrix& points, const RunSetup& setup) override {
        use_device();
        if (points.rows == 0 || points.cols == 0) {
            throw Error("cuda backend: no points to upload (" + std::to_string(points.rows) + " x " +
                        std::to_string(points.cols) + ")");
        }
        if (points.rows >= kMaxRows || points.cols > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
            throw Error("cuda backend: " + std::to_string(points.rows) + " x " + std::to_string(points.cols) +
                        " points exceed the backend's limit of 2^31 rows");
        }
        if (points.data.size() != points.rows * points.cols) {
            throw Error("cuda backend: point matrix holds " + std::to_string(points.data.size()) + " values, not " +
                        std::to_string(points.rows * points.cols));
        }
        // Points of the shape this backend holds go into the same buffers, and the anchors' buffers
        // (sized by n, m and d) stay for a seeding of as many anchors: sub-space fits upload many
        // sets of one shape, and every cudaFree waits for the whole device, the other fits' streams
        // included.
        const bool same_shape = assignment_.size() == points.rows && d_ == points.cols &&
                                points_.storage() == setup.format.storage;
        if (same_shape) {
            stream_.synchronize();
            m_ = 0;  // the anchors were the old points'
            have_stats_ = false;
        } else {
            release_anchor_buffers();
            allocate_point_buffers(points.rows, points.cols, setup.format.storage);
        }
        const cudaStream_t s = stream_.get();
        points_.upload(points, setup.format, s);
        CUDA_CHECK(cudaMemsetAsync(assignment_.data(), 0xff, assignment_.bytes(), s));
        stream_.synchronize();
        n_ = points.rows;
        d_ = points.cols;
        precision_ = setup.precision;
        assigned_ = false;
        fast_path_ = first_fast_path(kernels_, kernel_);
        ++generation_;
    }

    void upload_anchors(const Matrix& anchors) override {
        use_device();
        require_points("upload_anchors");
        if (anchors.rows == 0 || anchors.cols != d_ || anchors.data.size() != anchors.rows * anchors.cols) {
            throw Error("cuda backend: anchors are " + std::to_string(anchors.rows) + " x " +
                        std::to_string(anchors.cols) + ", expected at least one row of " + std::to_string(d_));
        }
        if (anchors.rows >= kMaxRows) {
            throw Error("cuda backend: " + std::to_string(anchors.rows) + " anchors exceed the limit of 2^31");
        }
        if (anchors.rows != m_) {
            hold_anchors(anchors.rows);
            // Old ids may point past the new anchors: reduce and energy wait for the next assign.
            assigned_ = false;
        }
        CUDA_CHECK(cudaMemcpyAsync(anchors_.data(), anchors.data.data(), anchors_.bytes(), cudaMemcpyHostToDevice,
                                   stream_.get()));
        forget_prior();
        stream_.synchronize();
        have_stats_ = false;
    }

    // k-means++ on the device, pick for pick the CPU's; only a sample where every weight reaches zero
    // (fewer distinct points than anchors) takes the CPU's path, which then draws differently.
    void seed_anchors(const Matrix& points, std::size_t m, std::size_t sample_size, std::uint64_t seed) override {
        use_device();
        require_points("seed_anchors");
        if (points.rows != n_ || points.cols != d_) {
            throw Error("cuda backend: seed_anchors got " + std::to_string(points.rows) + " x " +
                        std::to_string(points.cols) + " points, not the uploaded " + std::to_string(n_) + " x " +
                        std::to_string(d_));
        }
        if (m == 0 || m >= kMaxRows) {
            throw Error("cuda backend: seed_anchors needs 1 to 2^31 anchors, got " + std::to_string(m));
        }
        const SeedingDraws draws = draw_seeding(n_, m, sample_size, seed);
        const std::size_t s = draws.sample.size();
        if (m != m_) {
            hold_anchors(m);
            assigned_ = false;  // old ids may point past the new anchors
        }
        const std::vector<std::uint32_t> sample(draws.sample.begin(), draws.sample.end());
        SeedScratch& k = seed_scratch_;
        k.reserve(s, d_, m, draws.uniforms.size());
        DeviceBuffer<std::uint32_t>& sample_ids = k.sample_ids;
        DeviceBuffer<float>& sample_rows = k.sample_rows;
        DeviceBuffer<double>& uniforms = k.uniforms;
        DeviceBuffer<int>& degenerate = k.degenerate;
        DeviceBuffer<std::uint32_t>& chosen = k.chosen;
        const cudaStream_t st = stream_.get();
        const auto first = static_cast<std::uint32_t>(draws.first);
        CUDA_CHECK(cudaMemcpyAsync(sample_ids.data(), sample.data(), s * sizeof(std::uint32_t), cudaMemcpyHostToDevice, st));
        CUDA_CHECK(cudaMemcpyAsync(uniforms.data(), draws.uniforms.data(), draws.uniforms.size() * sizeof(double),
                                   cudaMemcpyHostToDevice, st));
        CUDA_CHECK(cudaMemcpyAsync(chosen.data(), &first, sizeof first, cudaMemcpyHostToDevice, st));
        CUDA_CHECK(cudaMemsetAsync(degenerate.data(), 0, degenerate.bytes(), st));
        // The sampled rows in float32, in sample order, whatever the storage.
        cuda::launch_gather_rows(points_.rows(), sample_ids.data(), s, dim(), sample_rows.data(), st);

        cuda::SeedArgs args;
        args.sample = sample_rows.data();
        args.d = dim();
        args.s = s;
        args.m = m;
        args.uniforms = uniforms.data();
        args.anchors = anchors_.data();
        args.nearest = k.nearest.data();
        args.owner = k.owner.data();
        args.gap = k.gap.data();
        args.block_sums = k.block_sums.data();
        args.block_lows = k.block_lows.data();
        args.chosen = chosen.data();
        args.degenerate = degenerate.data();
        cuda::launch_seed_anchors(args, st);
        forget_prior();
        prepare_iteration_graphs();
        int fell_through = 0;
        CUDA_CHECK(cudaMemcpyAsync(&fell_through, degenerate.data(), sizeof fell_through, cudaMemcpyDeviceToHost, st));
        stream_.synchronize();
        have_stats_ = false;
        k.release_if_large();
        if (fell_through != 0) {
            upload_anchors(kmeans_plus_plus(points, m, sample_size, seed));
        }
    }

    void upload_anchor_rows(const Matrix& values, const std::vector<std::uint32_t>& rows) override {
        use_device();
        require_anchors("upload_anchor_rows");
        if (values.cols != d_ || values.rows != rows.size()) {
            throw Error("cuda backend: upload_anchor_rows got " + std::to_string(values.rows) + " rows of " +
                        std::to_string(values.cols) + " values for " + std::to_string(rows.size()) +
                        " listed rows of " + std::to_string(d_));
        }
        require_rows_below(rows, m_, name(), "upload_anchor_rows");
        // Staged and scattered into place on the device, at most m at a time.
        const cudaStream_t s = stream_.get();
        for (std::size_t start = 0; start < rows.size(); start += m_) {
            const std::size_t count = std::min(m_, rows.size() - start);
            CUDA_CHECK(cudaMemcpyAsync(row_staging_.data(), values.row(start), count * d_ * sizeof(float),
                                       cudaMemcpyHostToDevice, s));
            CUDA_CHECK(cudaMemcpyAsync(row_ids_.data(), rows.data() + start, count * sizeof(std::uint32_t),
                                       cudaMemcpyHostToDevice, s));
            cuda::launch_scatter_rows(anchors_.data(), row_staging_.data(), row_ids_.data(), count, dim(), s);
            cuda::launch_fill_listed(anchor_moved_.data(), row_ids_.data(), count, kReplaced, s);
            stream_.synchronize();
        }
    }

    Matrix download_anchors() override {
        use_device();
        require_anchors("download_anchors");
        Matrix out(m_, d_);
        copy_rows_down(anchors_.data(), m_, out.data.data());
        return out;
    }

    // Gathered on the device, at most m at a time, so that only the listed rows travel.
    Matrix download_anchor_rows(const std::vector<std::uint32_t>& rows) override {
        use_device();
        require_anchors("download_anchor_rows");
        require_rows_below(rows, m_, name(), "download_anchor_rows");
        Matrix out(rows.size(), d_);
        const cudaStream_t s = stream_.get();
        for (std::size_t start = 0; start < rows.size(); start += m_) {
            const std::size_t count = std::min(m_, rows.size() - start);
            CUDA_CHECK(cudaMemcpyAsync(row_ids_.data(), rows.data() + start, count * sizeof(std::uint32_t),
                                       cudaMemcpyHostToDevice, s));
            cuda::launch_gather_rows(cuda::PointRows::floats(anchors_.data(), dim()), row_ids_.data(), count, dim(),
                                     row_staging_.data(), s);
            copy_rows_down(row_staging_.data(), count, out.row(start));
        }
        return out;
    }

    AssignStats assign() override {
        use_device();
        require_anchors("assign");
        const cudaStream_t s = stream_.get();
        const bool repair = precision_ == AssignPrecision::exact;
        shortlist_graph_.run(s, assign_key(repair), [&] { queue_shortlist(repair); });
        stream_.synchronize();
        // One half-precision product leaves a window of uncertainty of the rows' rounding times the
        // distance (single_window.cuh). Where anchors crowd around the points (many nearly
        // equidistant), many points then need every anchor re-scored; they are narrowed (a split
        // pass over just them), or when they are most of the points, the shortlist is redone split
        // and the run keeps that path from then on.
        const std::size_t all_anchor = host_[0].uncertain_counts[1];
        if (kernel_ == FastKernel::automatic && repair && fast_path_ == cuda::FastPath::half_single) {
            if (all_anchor > n_ / kMaxAllAnchorShare) {
                fast_path_ = cuda::FastPath::half_split;
                shortlist_graph_.run(s, assign_key(repair), [&] { queue_shortlist(repair); });
            } else if (cuda::worth_narrowing(all_anchor, m_, dim())) {
                narrow(all_anchor);
            }
        }
        finish_graph_.run(s, assign_key(repair), [&] { queue_finish(repair); });
        stream_.synchronize();
        assigned_ = true;

        AssignStats stats;
        stats.changed = static_cast<std::size_t>(host_[0].changed);
        stats.energy = host_[0].energy_sum / static_cast<double>(n_);
        return stats;
    }

    void robust_reduce(double trim) override {
        use_device();
        require_assignment("robust_reduce");
        if (!(trim >= 0.0 && trim < 1.0)) {
            throw Error("cuda backend: trim must be in [0, 1), got " + std::to_string(trim));
        }
        host_[0].trim = trim;
        const bool trims = cuda::trims_any(trim, n_);
        reduce_graph_.run(stream_.get(), reduce_key(trims), [&] { queue_reduce(trims); });
        stream_.synchronize();
        have_stats_ = true;
    }

    AnchorStats download_stats() override {
        use_device();
        AnchorStats stats;
        if (!have_stats_) {
            return stats;
        }
        stats.count.resize(m_);
        stats.kept.resize(m_);
        stats.variance.resize(m_);
        const cudaStream_t s = stream_.get();
        CUDA_CHECK(cudaMemcpyAsync(stats.count.data(), count_.data(), count_.bytes(), cudaMemcpyDeviceToHost, s));
        CUDA_CHECK(cudaMemcpyAsync(stats.kept.data(), kept_.data(), kept_.bytes(), cudaMemcpyDeviceToHost, s));
        CUDA_CHECK(
            cudaMemcpyAsync(stats.variance.data(), variance_.data(), variance_.bytes(), cudaMemcpyDeviceToHost, s));
        stream_.synchronize();
        return stats;
    }

    void update(double eta) override {
        use_device();
        if (!have_stats_) {
            throw Error("cuda backend: update needs a robust_reduce of the current anchors first");
        }
        // Queued only: whatever reads the anchors next waits on the stream, and the host reads nothing
        // from the update, so a wait here would only leave the device idle between two launches.
        cuda::launch_update(anchors_.data(), means_.data(), kept_.data(), m_, dim(), eta, anchor_moved_.data(),
                            stream_.get());
    }

    double energy() override {
        use_device();
        require_assignment("energy");
        cuda::PointDistanceArgs distances;
        distances.points = points_.rows();
        distances.anchors = anchors_.data();
        distances.n = n_;
        distances.d = dim();
        distances.source = assignment_.data();
        distances.block_sums = block_sums_.data();
        const cudaStream_t s = stream_.get();
        cuda::launch_point_distances(distances, s);
        queue_energy_sum();
        stream_.synchronize();
        return host_[0].energy_sum / static_cast<double>(n_);
    }

    std::vector<std::uint32_t> download_assignments() override {
        use_device();
        require_points("download_assignments");
        std::vector<std::uint32_t> out(n_);
        CUDA_CHECK(cudaMemcpyAsync(out.data(), assignment_.data(), assignment_.bytes(), cudaMemcpyDeviceToHost,
                                   stream_.get()));
        stream_.synchronize();
        return out;
    }

    std::vector<Matrix> gather_members(const std::vector<std::uint32_t>& anchors, std::size_t limit) override {
        std::vector<Matrix> out;
        out.reserve(anchors.size());
        const cudaStream_t s = stream_.get();
        for_member_batches(anchors, "gather_members", [&](const std::uint32_t* listed, std::size_t count) {
            for_member_pieces(listed, count, limit, [&](const MemberPiece& piece) {
                const std::size_t values = static_cast<std::size_t>(piece.kept[piece.last] - piece.kept[piece.first]) * d_;
                if (gathered_host_.size() < values) {
                    gathered_host_ = PinnedBuffer<float>(values);
                }
                CUDA_CHECK(cudaMemcpyAsync(gathered_host_.data(), gathered_.data(), values * sizeof(float),
                                           cudaMemcpyDeviceToHost, s));
                stream_.synchronize();
                for (std::size_t t = piece.first; t < piece.last; ++t) {
                    Matrix members(piece.kept[t + 1] - piece.kept[t], d_);
                    std::memcpy(members.data.data(),
                                gathered_host_.data() + static_cast<std::size_t>(piece.kept[t] - piece.kept[piece.first]) * d_,
                                members.data.size() * sizeof(float));
                    out.push_back(std::move(members));
                }
            });
        });
        return out;
    }

    // The 2-means on the device, where the members are: only two centres and two sums per anchor
    // come back (a host copy of 256 members of 600 anchors at d = 768 took 0.37 s on the H100 machine).
    std::vector<MemberSplit> split_members(const std::vector<std::uint32_t>& anchors, std::size_t limit) override {
        std::vector<MemberSplit> out;
        out.reserve(anchors.size());
        const cudaStream_t s = stream_.get();
        for_member_batches(anchors, "split_members", [&](const std::uint32_t* listed, std::size_t count) {
            SplitScratch& k = split_scratch_;
            k.reserve_anchors(count, d_);
            const std::vector<std::uint32_t> kept = for_member_pieces(listed, count, limit, [&](const MemberPiece& piece) {
                k.reserve_rows(piece.kept[piece.last] - piece.kept[piece.first]);
                cuda::TwoMeansArgs args;
                args.rows = gathered_.data();
                args.offsets = kept_offsets_.data();
                args.first = piece.first;
                args.count = piece.last - piece.first;
                args.d = dim();
                args.means = k.means.data();
                args.centres = k.centres.data();
                args.sums = k.sums.data();
                args.ok = k.ok.data();
                args.side_sums = k.side_sums.data();
                args.counts = k.counts.data();
                args.distances = k.distances.data();
                args.sides = k.sides.data();
                args.clusters = kernels_ == GpuKernels::hopper;
                args.shared_limit = gpu_shape_.shared_limit;
                cuda::launch_two_means(args, s);  // before the next piece's gather, in stream order
            });
            std::vector<double> host_sums(count * 2);
            std::vector<int> host_ok(count);
            CUDA_CHECK(cudaMemcpyAsync(host_sums.data(), k.sums.data(), host_sums.size() * sizeof(double),
                                       cudaMemcpyDeviceToHost, s));
            CUDA_CHECK(cudaMemcpyAsync(host_ok.data(), k.ok.data(), host_ok.size() * sizeof(int), cudaMemcpyDeviceToHost, s));
            // Two centres per listed anchor: 6 KB each at d = 784, too many for a pageable copy.
            std::vector<float> host_centres(count * 2 * d_);
            copy_rows_down(k.centres.data(), count * 2, host_centres.data());
            for (std::size_t t = 0; t < count; ++t) {
                MemberSplit split;
                split.rows = kept[t + 1] - kept[t];
                if (host_ok[t] != 0) {
                    split.ok = true;
                    const float* left = host_centres.data() + t * 2 * d_;
                    split.left.assign(left, left + d_);
                    split.right.assign(left + d_, left + 2 * d_);
                    split.before = host_sums[2 * t];
                    split.after = host_sums[2 * t + 1];
                }
                out.push_back(std::move(split));
            }
        });
        return out;
    }

    // Checks a list of anchors and calls each(listed, count) on batches of at most m of them, in
    // order; ids beyond the anchors are allowed (they have no members).
    template <class Each>
    void for_member_batches(const std::vector<std::uint32_t>& anchors, const char* call, Each each) {
        use_device();
        require_anchors(call);
        require_distinct_anchors(anchors, m_, name(), call);
        for (std::size_t batch = 0; batch < anchors.size(); batch += m_) {
            each(anchors.data() + batch, std::min(m_, anchors.size() - batch));
        }
    }

    // A piece of a batch's members on the device: list positions [first, last) of the batch, whose
    // kept rows (kept[t] to kept[t + 1] for position t) lie packed in gathered_ from kept[first].
    struct MemberPiece {
        std::size_t first;
        std::size_t last;
        const std::vector<std::uint32_t>& kept;
    };

    // The first `limit` members of each of `count` <= m listed anchors, gathered on the device in
    // pieces of whole anchors that fit a bounded buffer (kept_offsets_ holds the batch's kept
    // offsets); consume(piece) runs on each before the next overwrites it. Returns the kept offsets.
    template <class Consume>
    std::vector<std::uint32_t> for_member_pieces(const std::uint32_t* anchors, std::size_t count, std::size_t limit, Consume consume) {
        const cudaStream_t s = stream_.get();
        cuda::GatherArgs args;
        args.points = points_.rows();
        args.assignment = assignment_.data();
        args.n = n_;
        args.m = m_;
        args.d = dim();
        args.listed = row_ids_.data();
        args.count = count;
        args.slot_of = member_slot_.data();
        for (int b = 0; b < 2; ++b) {
            args.keys[b] = anchor_keys_[b].data();
            args.members[b] = members_[b].data();
        }
        args.selected = selected_.data();
        args.temp = temp_.data();
        args.temp_bytes = temp_.bytes();
        args.offsets = offsets_.data();
        CUDA_CHECK(cudaMemcpyAsync(row_ids_.data(), anchors, count * sizeof(std::uint32_t),
                                   cudaMemcpyHostToDevice, s));
        cuda::launch_select_listed(args, s);
        CUDA_CHECK(
            cudaMemcpyAsync(&host_[0].selected, selected_.data(), selected_.bytes(), cudaMemcpyDeviceToHost, s));
        stream_.synchronize();
        const std::uint32_t* grouped = cuda::launch_group_listed(args, static_cast<std::size_t>(host_[0].selected), s);
        std::vector<std::uint32_t> offsets(count + 1);
        CUDA_CHECK(cudaMemcpyAsync(offsets.data(), offsets_.data(), offsets.size() * sizeof(std::uint32_t),
                                   cudaMemcpyDeviceToHost, s));
        stream_.synchronize();

        std::vector<std::uint32_t> kept(count + 1, 0);
        for (std::size_t t = 0; t < count; ++t) {
            kept[t + 1] = kept[t] + static_cast<std::uint32_t>(std::min<std::size_t>(limit, offsets[t + 1] - offsets[t]));
        }
        CUDA_CHECK(cudaMemcpyAsync(kept_offsets_.data(), kept.data(), kept.size() * sizeof(std::uint32_t),
                                   cudaMemcpyHostToDevice, s));
        // Rows per piece; a piece holds one anchor at least, so an anchor that keeps more rows than
        // this has a piece of its own.
        const std::size_t capacity = gather_floats_ / d_;
        for (std::size_t first = 0; first < count;) {
            std::size_t last = first + 1;
            while (last < count && kept[last + 1] - kept[first] <= capacity) {
                ++last;
            }
            const std::size_t values = static_cast<std::size_t>(kept[last] - kept[first]) * d_;
            if (gathered_.size() < values) {
                gathered_ = DeviceBuffer<float>(values);
            }
            cuda::launch_gather_rows(args, grouped, kept_offsets_.data(), first, last - first, kept[last] - kept[first],
                                     gathered_.data(), s);
            consume(MemberPiece{first, last, kept});
            first = last;
        }
        return kept;
    }

    // The rows go up into buffers of their own, so nothing the run keeps on the device is touched.
    std::vector<std::uint8_t> encode_product(const ProductCodebook& book, const Matrix& points, const Matrix& anchors,
                                             const std::vector<std::uint32_t>& assignments) override {
        use_device();
        return cuda::encode_product(book, points, anchors, assignments, stream_.get());
    }

    Matrix rotate_rows(const Matrix& rotation, const Matrix& rows) override {
        use_device();
        if (rotation.cols != rows.cols) {
            throw Error("cuda backend: rotate_rows: the rotation has " + std::to_string(rotation.cols) +
                        " columns for rows of " + std::to_string(rows.cols));
        }
        return cuda::rotate_rows(rotation, rows, stream_.get());
    }

    // Sub-space fits are small: several streams keep the GPU busy while each waits on its host.
    std::size_t side_by_side() const override { return kSiblings; }
    std::unique_ptr<Backend> sibling() const override {
        return std::make_unique<CudaBackend>(gpu_, kernel_, gather_floats_, kernels_);
    }
    bool trains_side_by_side() const override { return true; }

    NearestRows nearest_rows(const Matrix& rows) override {
        use_device();
        require_points("nearest_rows");
        const std::size_t count = rows.rows;
        if (count < 2 || rows.cols != d_ || rows.data.size() != count * d_) {
            throw Error("cuda backend: nearest_rows needs at least two rows of " + std::to_string(d_) + " values, got " +
                        std::to_string(count) + " x " + std::to_string(rows.cols));
        }
        if (count >= kMaxRows) {
            throw Error("cuda backend: nearest_rows got " + std::to_string(count) + " rows, more than 2^31");
        }
        NearestScratch& k = nearest_scratch_;
        if (k.rows.size() < count * d_) {
            k.rows = DeviceBuffer<float>(count * d_);
        }
        CUDA_CHECK(cudaMemcpyAsync(k.rows.data(), rows.data.data(), count * d_ * sizeof(float), cudaMemcpyHostToDevice,
                                   stream_.get()));
        return nearest_among(k.rows.data(), count, false);
    }

    // All anchors, in order, are the usual list: then the anchors on the device serve as they are,
    // with no copy of them up or down (3 MB each way at Fashion-MNIST's 1,024 x 784).
    NearestRows nearest_anchors(const std::vector<std::uint32_t>& live) override {
        bool all = live.size() == m_;
        for (std::size_t r = 0; all && r < live.size(); ++r) {
            all = live[r] == r;
        }
        if (!all || m_ < 2) {
            return Backend::nearest_anchors(live);
        }
        use_device();
        require_points("nearest_anchors");
        require_anchors("nearest_anchors");
        return nearest_among(anchors_.data(), m_, true);
    }

private:
    // nearest_rows of `count` float32 rows already on the device; `anchors`: they are anchors_.
    NearestRows nearest_among(const float* rows, std::size_t count, bool anchors) {
        const cuda::AssignPlan plan = cuda::plan_assign(count, count, dim(), gpu_shape_);
        nearest_scratch_.reserve(count, static_cast<std::size_t>(plan.splits) * count, cuda::distance_block_count(count));
        NearestScratch& k = nearest_scratch_;
        const cudaStream_t s = stream_.get();
        CUDA_CHECK(cudaMemsetAsync(k.uncertain_counts.data(), 0, k.uncertain_counts.bytes(), s));
        const cuda::PointRows rows_view = cuda::PointRows::floats(rows, dim());

        cuda::AssignArgs args;
        args.points = rows_view;
        args.anchors = rows;
        args.n = count;
        args.m = count;
        args.d = dim();
        args.exclude_self = true;
        // Anchors crowd each other, and they are float32 rows: the kernel needs a window as narrow as
        // float32's. The anchors' own float16 operands give the tensor cores' three products one
        // (narrower at large d); the float32 kernel, the fallback, ran on 64 of the H100's 132
        // multiprocessors at 1,024 anchors, 0.14 ms a pass at d = 784.
        if (anchors && points_.half_type() == cuda::HalfType::f16 && kernels_ != GpuKernels::cuda_cores) {
            queue_anchor_operands();
            args.point_norms = anchor_norms_.data();
            args.anchor_norms = anchor_norms_.data();
            args.max_anchor_norm_bits = max_anchor_norm_bits_.data();
            args.path = cuda::FastPath::half_split;
            args.half = anchor_operands();
            args.half.point_head = anchor_head_.data();
            args.half.point_tail = anchor_tail_.data();
        } else {
            CUDA_CHECK(cudaMemsetAsync(k.max_norm_bits.data(), 0, k.max_norm_bits.bytes(), s));
            cuda::launch_squared_norms(rows_view, count, dim(), k.norms.data(), k.max_norm_bits.data(), s);
            args.point_norms = k.norms.data();
            args.anchor_norms = k.norms.data();
            args.max_anchor_norm_bits = k.max_norm_bits.data();
            args.path = cuda::FastPath::fp32;
        }
        args.engine = engine();
        args.plan = plan;
        args.candidates = k.candidates.data();
        args.chosen = k.chosen.data();
        args.uncertain = k.uncertain.data();
        args.uncertain_counts = k.uncertain_counts.data();
        args.gpu = gpu_shape_;
        cuda::launch_shortlist(args, s);
        cuda::launch_repair(args, s);

        cuda::PointDistanceArgs distances;
        distances.points = rows_view;
        distances.anchors = rows;
        distances.n = count;
        distances.d = dim();
        distances.source = k.chosen.data();
        distances.distance = k.distance.data();
        distances.block_sums = k.block_sums.data();
        cuda::launch_point_distances(distances, s);

        NearestRows out;
        out.index.resize(count);
        out.distance.resize(count);
        CUDA_CHECK(cudaMemcpyAsync(out.index.data(), k.chosen.data(), count * sizeof(std::uint32_t),
                                   cudaMemcpyDeviceToHost, s));
        CUDA_CHECK(cudaMemcpyAsync(out.distance.data(), k.distance.data(), count * sizeof(double),
                                   cudaMemcpyDeviceToHost, s));
        stream_.synchronize();
        return out;
    }

    // k-means++'s buffers, grown on demand and kept while small: sub-space fits seed many samples
    // of one shape. About s x (d + 4) floats for a sample of s rows, then dropped past kKeptBytes.
    struct SeedScratch {
        static constexpr std::size_t kKeptBytes = std::size_t{64} << 20;
        DeviceBuffer<std::uint32_t> sample_ids;
        DeviceBuffer<float> sample_rows;
        DeviceBuffer<double> uniforms;
        DeviceBuffer<double> nearest;
        DeviceBuffer<std::uint32_t> owner;
        DeviceBuffer<double> gap;
        DeviceBuffer<double> block_sums;
        DeviceBuffer<int> block_lows;
        DeviceBuffer<std::uint32_t> chosen{1};
        DeviceBuffer<int> degenerate{1};

        void reserve(std::size_t s, std::size_t d, std::size_t m, std::size_t uniform_count) {
            cuda::grow_buffer(sample_ids, s);
            cuda::grow_buffer(sample_rows, s * d);
            cuda::grow_buffer(uniforms, std::max<std::size_t>(uniform_count, 1));
            cuda::grow_buffer(nearest, s);
            cuda::grow_buffer(owner, s);
            cuda::grow_buffer(gap, m);
            cuda::grow_buffer(block_sums, cuda::seed_block_count(s));
            cuda::grow_buffer(block_lows, cuda::seed_block_count(s));
        }
        void release_if_large() {
            if (sample_rows.bytes() + nearest.bytes() + gap.bytes() > kKeptBytes) {
                *this = SeedScratch();
            }
        }
    };

    // Buffers of nearest_rows, made with the anchors' for all of them and grown on demand.
    struct NearestScratch {
        DeviceBuffer<float> rows;  // nearest_rows' rows, uploaded
        DeviceBuffer<float> norms;
        DeviceBuffer<unsigned> max_norm_bits;
        DeviceBuffer<cuda::Candidate> candidates;
        DeviceBuffer<std::uint32_t> chosen;
        DeviceBuffer<std::uint32_t> uncertain;
        DeviceBuffer<unsigned> uncertain_counts;
        DeviceBuffer<double> distance;
        DeviceBuffer<double> block_sums;

        static void add_footprint(Footprint& need, std::size_t count, std::size_t candidate_count,
                                  std::size_t block_count) {
            need.add<float>(count).add<std::uint32_t>(count).add<std::uint32_t>(count).add<double>(count);
            need.add<cuda::Candidate>(candidate_count).add<double>(block_count);
        }
        void reserve(std::size_t count, std::size_t candidate_count, std::size_t block_count) {
            if (chosen.size() < count) {
                norms = DeviceBuffer<float>(count);
                chosen = DeviceBuffer<std::uint32_t>(count);
                uncertain = DeviceBuffer<std::uint32_t>(count);
                distance = DeviceBuffer<double>(count);
            }
            if (candidates.size() < candidate_count) {
                candidates = DeviceBuffer<cuda::Candidate>(candidate_count);
            }
            if (block_sums.size() < block_count) {
                block_sums = DeviceBuffer<double>(block_count);
            }
            if (max_norm_bits.size() == 0) {
                max_norm_bits = DeviceBuffer<unsigned>(1);
                uncertain_counts = DeviceBuffer<unsigned>(2);
            }
        }
    };

    // Buffers of split_members, made with the anchors' and grown on demand: allocating and freeing
    // them on every call cost about 14 us a buffer, a sixth of a 2-means pass at (a).
    struct SplitScratch {
        DeviceBuffer<float> means;    // per listed anchor, d
        DeviceBuffer<float> centres;  // per listed anchor, 2 d
        DeviceBuffer<double> sums;    // per listed anchor, 2
        DeviceBuffer<int> ok;
        DeviceBuffer<double> side_sums;  // per listed anchor, 2 d
        DeviceBuffer<int> counts;        // per listed anchor, 2 per block of its cluster
        DeviceBuffer<float> distances;  // per member of a piece, 2
        DeviceBuffer<signed char> sides;

        static void add_footprint(Footprint& need, std::size_t count, std::size_t d, std::size_t rows) {
            need.add<float>(count * d).add<float>(count * 2 * d).add<double>(count * 2).add<int>(count);
            need.add<double>(count * 2 * d).add<int>(count * 2 * cuda::kTwoMeansBlocks);
            need.add<float>(2 * rows).add<signed char>(rows);
        }
        void reserve_anchors(std::size_t count, std::size_t d) {
            if (ok.size() < count || means.size() < count * d) {
                means = {};
                centres = {};
                side_sums = {};
                means = DeviceBuffer<float>(count * d);
                centres = DeviceBuffer<float>(count * 2 * d);
                sums = DeviceBuffer<double>(count * 2);
                ok = DeviceBuffer<int>(count);
                side_sums = DeviceBuffer<double>(count * 2 * d);
                counts = DeviceBuffer<int>(count * 2 * cuda::kTwoMeansBlocks);
            }
        }
        void reserve_rows(std::size_t rows) {
            if (sides.size() < rows) {
                distances = {};
                distances = DeviceBuffer<float>(2 * rows);
                sides = DeviceBuffer<signed char>(rows);
            }
        }
    };

    // Buffers of the narrowing (cuda::launch_narrow), grown on demand with a quarter to spare, since
    // the count of points it takes changes from one assign to the next.
    struct NarrowScratch {
        DeviceBuffer<std::uint32_t> ids;
        DeviceBuffer<float> norms;
        DeviceBuffer<std::uint16_t> head;
        DeviceBuffer<std::uint16_t> tail;
        DeviceBuffer<cuda::Candidate> candidates;

        cuda::NarrowBuffers reserve(std::size_t count, std::size_t stride, std::size_t candidate_count, bool tails) {
            if (ids.size() < count || head.size() < count * stride || (tails && tail.size() < count * stride)) {
                const std::size_t rows = count + count / 4;
                ids = {};
                norms = {};
                head = {};
                tail = {};
                ids = DeviceBuffer<std::uint32_t>(rows);
                norms = DeviceBuffer<float>(rows);
                head = DeviceBuffer<std::uint16_t>(rows * stride);
                tail = tails ? DeviceBuffer<std::uint16_t>(rows * stride) : DeviceBuffer<std::uint16_t>();
            }
            if (candidates.size() < candidate_count) {
                candidates = {};
                candidates = DeviceBuffer<cuda::Candidate>(candidate_count + candidate_count / 4);
            }
            return {ids.data(), norms.data(), head.data(), tail.data(), candidates.data()};
        }
    };

    int dim() const { return static_cast<int>(d_); }

    // The `count` all-anchor points of the last shortlist, narrowed, queued on the stream.
    void narrow(std::size_t count) {
        const cuda::AssignPlan plan = cuda::plan_assign(count, m_, dim(), gpu_shape_);
        const std::size_t stride = static_cast<std::size_t>(cuda::half_stride(dim()));
        const cuda::NarrowBuffers buffers = narrow_scratch_.reserve(
            count, stride, static_cast<std::size_t>(plan.splits) * count, points_.tail() != nullptr);
        cuda::launch_narrow(assign_args(true), count, buffers, stream_.get());
    }

    // `count` device rows of d floats to `host`, through pinned memory: pageable copies of all
    // anchors ran at 1.5 GB/s on the H100 machine. Returns once they are there.
    void copy_rows_down(const float* rows, std::size_t count, float* host) {
        const std::size_t values = count * d_;
        if (host_staging_.size() < values) {
            host_staging_ = PinnedBuffer<float>(values);
        }
        CUDA_CHECK(cudaMemcpyAsync(host_staging_.data(), rows, values * sizeof(float), cudaMemcpyDeviceToHost,
                                   stream_.get()));
        stream_.synchronize();
        std::memcpy(host, host_staging_.data(), values * sizeof(float));
    }

    // Every anchor was replaced: the last assign bounds nothing.
    void forget_prior() { cuda::launch_fill(anchor_moved_.data(), m_, kReplaced, stream_.get()); }

    // The current device is per host thread, and the caller may have changed it since the last call.
    void use_device() const { CUDA_CHECK(cudaSetDevice(gpu_)); }

    void require_points(const char* call) const {
        if (n_ == 0) {
            throw Error(std::string("cuda backend: ") + call + " before upload_points");
        }
    }
    void require_anchors(const char* call) const {
        require_points(call);
        if (m_ == 0) {
            throw Error(std::string("cuda backend: ") + call + " before upload_anchors");
        }
    }
    void require_assignment(const char* call) const {
        require_anchors(call);
        if (!assigned_) {
            throw Error(std::string("cuda backend: ") + call + " needs an assign with the current anchor count first");
        }
    }

    void check_fits(std::size_t bytes, const std::string& what) const {
        std::size_t free_bytes = 0;
        std::size_t total_bytes = 0;
        CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
        if (bytes > free_bytes) {
            throw Error("GPU " + std::to_string(gpu_) + " has too little memory for " + what + ": it needs " +
                        mib(bytes) + ", " + mib(free_bytes) + " of " + mib(total_bytes) + " are free");
        }
    }

    // The buffers sized by the points, each with its element count for n points: the one list that
    // the memory check, the allocation and the release read.
    template <class Each>
    void point_buffers(std::size_t n, Each&& each) {
        each(assignment_, n);
        each(chosen_, n);
        each(uncertain_, n);
        each(distance_, n);
        each(block_sums_, cuda::distance_block_count(n));
        for (int b = 0; b < 2; ++b) {
            each(anchor_keys_[b], n);
            each(members_[b], n);
        }
    }

    // What the buffers sized by the anchors are sized by, for m anchors over the points held.
    struct AnchorShape {
        std::size_t m = 0;
        std::size_t d = 0;
        std::size_t stride = 0;      // of the 16-bit operands
        std::size_t padded = 0;      // m in whole tiles, for the norms
        std::size_t candidates = 0;  // the assign plan's splits x n
        std::size_t chunks = 0;      // of the reduce's member sums
        std::size_t temp_bytes = 0;  // CUB's scratch
    };
    AnchorShape anchor_shape(std::size_t m, const cuda::AssignPlan& plan) const {
        AnchorShape a;
        a.m = m;
        a.d = d_;
        a.stride = static_cast<std::size_t>(cuda::half_stride(dim()));
        a.padded = cuda::ceil_div(m, cuda::kFastTile) * cuda::kFastTile;
        a.candidates = static_cast<std::size_t>(plan.splits) * n_;
        a.chunks = cuda::max_member_chunks(n_, m);
        // CUB reports its scratch needs for given sizes; one buffer serves every call, one at a time.
        a.temp_bytes =
            std::max({cuda::robust_reduce_temp_bytes(n_, m), cuda::sum_temp_bytes(cuda::distance_block_count(n_)),
                      cuda::gather_members_temp_bytes(n_), std::size_t{1}});
        return a;
    }

    // The buffers sized by the anchors, as point_buffers.
    template <class Each>
    void anchor_buffers(const AnchorShape& a, Each&& each) {
        each(anchors_, a.m * a.d);
        each(anchor_norms_, a.padded);
        each(anchor_head_norms_, a.padded);
        each(anchor_moved_, a.m);
        each(anchor_head_, a.m * a.stride);
        each(anchor_tail_, a.m * a.stride);
        each(candidates_, a.candidates);
        each(offsets_, a.m + 1);
        each(item_counts_, a.m + 1);
        each(item_offsets_, a.m + 1);
        each(count_, a.m);
        each(kept_, a.m);
        each(variance_, a.m);
        each(means_, a.m * a.d);
        each(partial_sums_, a.chunks * a.d);
        each(partial_distance_, a.chunks);
        each(row_staging_, a.m * a.d);
        each(row_ids_, a.m);
        each(member_slot_, a.m);
        each(kept_offsets_, a.m + 1);
        each(temp_, a.temp_bytes);
    }

    void allocate_point_buffers(std::size_t n, std::size_t d, PointStorage storage) {
        // Old buffers go first, so that their memory counts as free.
        points_.release();
        narrow_scratch_ = {};
        split_scratch_ = {};
        point_buffers(0, cuda::ReleaseBuffers{});
        n_ = 0;
        Footprint need;
        cuda::DevicePoints::add_footprint(need, n, d, storage);
        point_buffers(n, need);
        check_fits(need.bytes(), std::to_string(n) + " points of dimension " + std::to_string(d) + " stored as " +
                                     storage_name(storage));
        point_buffers(n, cuda::AllocateBuffers{});
        if (changed_.size() == 0) {
            changed_ = DeviceBuffer<unsigned long long>(1);
            uncertain_counts_ = DeviceBuffer<unsigned>(2);
            max_anchor_norm_bits_ = DeviceBuffer<unsigned>(1);
            anchor_head_maxima_ = DeviceBuffer<unsigned>(2);
            anchor_flags_ = DeviceBuffer<unsigned>(1);
            energy_sum_ = DeviceBuffer<double>(1);
            trim_ = DeviceBuffer<double>(1);
            selected_ = DeviceBuffer<std::int64_t>(1);
        }
    }

    // m anchors from here on, in the buffers there are when they were sized for m (and the points
    // held since), else in new ones.
    void hold_anchors(std::size_t m) {
        if (m == sized_m_) {
            stream_.synchronize();
            m_ = m;
            have_stats_ = false;
            ++generation_;
            return;
        }
        release_anchor_buffers();
        allocate_anchor_buffers(m);
    }

    void release_anchor_buffers() {
        stream_.synchronize();  // an update may still be queued on these buffers
        m_ = 0;
        sized_m_ = 0;
        have_stats_ = false;
        ++generation_;  // captured graphs name the buffers that go here
        anchor_buffers(AnchorShape{}, cuda::ReleaseBuffers{});
        host_staging_ = {};
        gathered_ = {};
        gathered_host_ = {};
    }

    void allocate_anchor_buffers(std::size_t m) {
        const std::size_t d = d_;
        const cuda::AssignPlan plan = cuda::plan_assign(n_, m, dim(), gpu_shape_);
        const AnchorShape shape = anchor_shape(m, plan);
        Footprint need;
        anchor_buffers(shape, need);
        // Maintenance's buffers come now, so that its first pass allocates none: the nearest anchors of
        // all, and the 2-means of an eighth of the anchors at once (a pass lists fewer as a rule) with
        // the rows of a whole gathered piece.
        const cuda::AssignPlan nearest_plan = cuda::plan_assign(m, m, dim(), gpu_shape_);
        const std::size_t nearest_candidates = static_cast<std::size_t>(nearest_plan.splits) * m;
        const std::size_t split_anchors = cuda::ceil_div(m, std::size_t{8});
        const std::size_t split_rows = std::min(n_, gather_floats_ / d);
        NearestScratch::add_footprint(need, m, nearest_candidates, cuda::distance_block_count(m));
        SplitScratch::add_footprint(need, split_anchors, d, split_rows);
        check_fits(need.bytes(), std::to_string(m) + " anchors of dimension " + std::to_string(d) + " for " +
                                     std::to_string(n_) + " points");

        anchor_buffers(shape, cuda::AllocateBuffers{});
        // Whole tiles of norms, +inf past the last anchor: the single-product kernel copies a tile's
        // at once, and the columns of missing anchors come out at +inf.
        pad_with_infinity(anchor_norms_, m);
        pad_with_infinity(anchor_head_norms_, m);
        host_staging_ = PinnedBuffer<float>(m * d);
        nearest_scratch_.reserve(m, nearest_candidates, cuda::distance_block_count(m));
        split_scratch_.reserve_anchors(split_anchors, d);
        split_scratch_.reserve_rows(split_rows);
        plan_ = plan;
        m_ = m;
        sized_m_ = m;
    }

    // Values [m, size) of `norms` set to +inf.
    static void pad_with_infinity(DeviceBuffer<float>& norms, std::size_t m) {
        const std::vector<float> padding(norms.size() - m, std::numeric_limits<float>::infinity());
        CUDA_CHECK(cudaMemcpy(norms.data() + m, padding.data(), padding.size() * sizeof(float), cudaMemcpyHostToDevice));
    }

    // The graphs of a first iteration, captured while the device seeds (k-means++ at Fashion-MNIST:
    // 17 ms), instead of behind that iteration's own work, which left the device idle while the host
    // captured. A hot start trims, and a reduce that turns out not to is captured when it comes.
    void prepare_iteration_graphs() {
        const cudaStream_t s = stream_.get();
        const bool repair = precision_ == AssignPrecision::exact;
        shortlist_graph_.prepare(s, assign_key(repair), [&] { queue_shortlist(repair); });
        finish_graph_.prepare(s, assign_key(repair), [&] { queue_finish(repair); });
        reduce_graph_.prepare(s, reduce_key(true), [&] { queue_reduce(true); });
    }

    std::uint64_t reduce_key(bool trims) const { return (generation_ << 1) | (trims ? 1 : 0); }

    // What the captured assign graphs depend on besides their buffers.
    std::uint64_t assign_key(bool repair) const {
        return (generation_ << 3) | (static_cast<std::uint64_t>(fast_path_) << 1) | (repair ? 1 : 0);
    }

    // The anchors' side of the 16-bit operands (queue_anchor_operands), in the points' type and scale.
    cuda::HalfOperands anchor_operands() const {
        cuda::HalfOperands half;
        half.type = points_.half_type();
        half.exponent = points_.exponent();
        half.anchor_head = anchor_head_.data();
        half.anchor_tail = anchor_tail_.data();
        half.anchor_flags = anchor_flags_.data();
        half.anchor_head_norms = anchor_head_norms_.data();
        half.anchor_head_maxima = anchor_head_maxima_.data();
        return half;
    }

    cuda::TensorEngine engine() const {
        return kernels_ == GpuKernels::hopper ? cuda::TensorEngine::wgmma : cuda::TensorEngine::mma_sync;
    }

    cuda::AssignArgs assign_args(bool repair) {
        cuda::AssignArgs args;
        args.points = points_.rows();
        args.point_norms = points_.norms();
        args.anchors = anchors_.data();
        args.anchor_norms = anchor_norms_.data();
        args.max_anchor_norm_bits = max_anchor_norm_bits_.data();
        args.n = n_;
        args.m = m_;
        args.d = dim();
        args.path = fast_path_;
        args.engine = engine();
        args.half = anchor_operands();
        args.half.point_head = points_.head();
        args.half.point_tail = points_.tail();
        args.half.point_head_norms = points_.head_norms();
        args.half.point_roundings = points_.roundings();
        args.repair = repair;
        args.plan = plan_;
        args.candidates = candidates_.data();
        args.chosen = chosen_.data();
        args.uncertain = uncertain_.data();
        args.uncertain_counts = uncertain_counts_.data();
        args.gpu = gpu_shape_;
        args.prior = {distance_.data(), assignment_.data(), anchor_moved_.data()};
        return args;
    }

    // The first half of an assign, queued on the stream (and captured once per configuration): the
    // anchors' norms and 16-bit operands, the fast kernel, and the counts of points to repair, on
    // their way to host_[0].uncertain_counts.
    void queue_shortlist(bool repair) {
        const cudaStream_t s = stream_.get();
        CUDA_CHECK(cudaMemsetAsync(uncertain_counts_.data(), 0, uncertain_counts_.bytes(), s));
        // Anchors change between assigns (update, uploads), so their norms and operands are made afresh.
        queue_anchor_operands();
        cuda::launch_shortlist(assign_args(repair), s);
        CUDA_CHECK(cudaMemcpyAsync(host_[0].uncertain_counts, uncertain_counts_.data(), uncertain_counts_.bytes(),
                                   cudaMemcpyDeviceToHost, s));
    }

    // The anchors' float32 norms and 16-bit operands (head, tail, the heads' norms), from anchors_ as
    // they are now.
    void queue_anchor_operands() {
        const cudaStream_t s = stream_.get();
        CUDA_CHECK(cudaMemsetAsync(max_anchor_norm_bits_.data(), 0, max_anchor_norm_bits_.bytes(), s));
        CUDA_CHECK(cudaMemsetAsync(anchor_flags_.data(), 0, anchor_flags_.bytes(), s));
        CUDA_CHECK(cudaMemsetAsync(anchor_head_maxima_.data(), 0, anchor_head_maxima_.bytes(), s));
        cuda::SplitArgs split;
        split.rows = anchors_.data();
        split.count = m_;
        split.d = dim();
        split.exponent = points_.exponent();
        split.type = points_.half_type();
        split.head = anchor_head_.data();
        split.tail = anchor_tail_.data();
        split.flags = anchor_flags_.data();
        cuda::HeadNormArgs heads;
        heads.rows = cuda::PointRows::floats(anchors_.data(), dim());
        heads.head = anchor_head_.data();
        heads.count = m_;
        heads.d = dim();
        heads.exponent = split.exponent;
        heads.type = split.type;
        heads.head_norms = anchor_head_norms_.data();
        heads.maxima = anchor_head_maxima_.data();
        cuda::launch_anchor_operands(split, heads, anchor_norms_.data(), max_anchor_norm_bits_.data(), s);
    }

    // The second half: the repair, each point's distance and the changes, and the scalars the driver reads.
    void queue_finish(bool repair) {
        const cudaStream_t s = stream_.get();
        CUDA_CHECK(cudaMemsetAsync(changed_.data(), 0, changed_.bytes(), s));
        cuda::launch_repair(assign_args(repair), s);
        cuda::PointDistanceArgs distances;
        distances.points = points_.rows();
        distances.anchors = anchors_.data();
        distances.n = n_;
        distances.d = dim();
        distances.source = chosen_.data();
        distances.assignment = assignment_.data();
        distances.changed = changed_.data();
        distances.distance = distance_.data();
        distances.block_sums = block_sums_.data();
        cuda::launch_point_distances(distances, s);
        // The distances are the current anchors': nothing has moved since them.
        CUDA_CHECK(cudaMemsetAsync(anchor_moved_.data(), 0, anchor_moved_.bytes(), s));
        queue_energy_sum();
        CUDA_CHECK(cudaMemcpyAsync(&host_[0].changed, changed_.data(), changed_.bytes(), cudaMemcpyDeviceToHost, s));
    }

    // The robust reduce, queued; the trim share comes from host_[0].trim when the work runs.
    void queue_reduce(bool trims) {
        const cudaStream_t s = stream_.get();
        CUDA_CHECK(cudaMemcpyAsync(trim_.data(), &host_[0].trim, sizeof(double), cudaMemcpyHostToDevice, s));
        cuda::ReduceArgs args;
        args.points = points_.rows();
        args.anchors = anchors_.data();
        args.distance = distance_.data();
        args.assignment = assignment_.data();
        args.n = n_;
        args.m = m_;
        args.d = dim();
        args.trim = trim_.data();
        args.trims = trims;
        for (int b = 0; b < 2; ++b) {
            args.anchor_keys[b] = anchor_keys_[b].data();
            args.members[b] = members_[b].data();
        }
        args.offsets = offsets_.data();
        args.item_counts = item_counts_.data();
        args.item_offsets = item_offsets_.data();
        args.partial_sums = partial_sums_.data();
        args.partial_distance = partial_distance_.data();
        args.count = count_.data();
        args.kept = kept_.data();
        args.variance = variance_.data();
        args.means = means_.data();
        args.temp = temp_.data();
        args.temp_bytes = temp_.bytes();
        cuda::launch_robust_reduce(args, s);
    }

    // Sums the per-block distance sums on the device and queues the total's way down to host_[0].energy_sum.
    void queue_energy_sum() {
        const cudaStream_t s = stream_.get();
        cuda::launch_sum(block_sums_.data(), block_sums_.size(), energy_sum_.data(), temp_.data(), temp_.bytes(), s);
        CUDA_CHECK(
            cudaMemcpyAsync(&host_[0].energy_sum, energy_sum_.data(), sizeof(double), cudaMemcpyDeviceToHost, s));
    }

    int gpu_;
    cuda::GpuShape gpu_shape_;
    GpuKernels kernels_;  // resolved: never automatic
    FastKernel kernel_;
    std::size_t gather_floats_;
    cuda::Stream stream_;
    // Bumped whenever buffers are replaced, so that no captured graph outlives what it names.
    std::uint64_t generation_ = 0;
    cuda::CachedGraph shortlist_graph_;
    cuda::CachedGraph finish_graph_;
    cuda::CachedGraph reduce_graph_;

    std::size_t n_ = 0;
    std::size_t d_ = 0;  // checked to fit the kernels' int
    std::size_t m_ = 0;
    std::size_t sized_m_ = 0;  // the anchor count the anchor buffers are sized for, with n_ and d_
    cuda::AssignPlan plan_;
    bool assigned_ = false;    // assignment_ holds ids valid for the current anchor count
    AssignPrecision precision_ = AssignPrecision::exact;
    cuda::FastPath fast_path_ = cuda::FastPath::half_single;
    bool have_stats_ = false;  // a robust_reduce ran since the anchors were last replaced

    // Per point, for the whole run.
    cuda::DevicePoints points_;
    DeviceBuffer<std::uint32_t> assignment_;
    DeviceBuffer<std::uint32_t> chosen_;
    DeviceBuffer<std::uint32_t> uncertain_;
    DeviceBuffer<double> distance_;
    DeviceBuffer<double> block_sums_;
    DeviceBuffer<std::uint32_t> anchor_keys_[2];
    DeviceBuffer<std::uint32_t> members_[2];

    // Per anchor, reallocated when the anchor count changes.
    DeviceBuffer<float> anchors_;
    DeviceBuffer<float> anchor_norms_;
    DeviceBuffer<float> anchor_head_norms_;  // of the 16-bit heads: the single product's norms
    // How far each anchor has moved since distance_ was taken, at most (kReplaced: no bound).
    DeviceBuffer<float> anchor_moved_;
    DeviceBuffer<std::uint16_t> anchor_head_;
    DeviceBuffer<std::uint16_t> anchor_tail_;
    DeviceBuffer<cuda::Candidate> candidates_;
    DeviceBuffer<std::uint32_t> offsets_;
    DeviceBuffer<std::uint32_t> item_counts_;
    DeviceBuffer<std::uint32_t> item_offsets_;
    DeviceBuffer<std::uint32_t> count_;
    DeviceBuffer<std::uint32_t> kept_;
    DeviceBuffer<double> variance_;
    DeviceBuffer<double> means_;
    DeviceBuffer<double> partial_sums_;
    DeviceBuffer<double> partial_distance_;
    DeviceBuffer<float> row_staging_;
    PinnedBuffer<float> host_staging_;  // m x d at least; grown by copy_rows_down
    DeviceBuffer<std::uint32_t> row_ids_;
    DeviceBuffer<std::uint32_t> member_slot_;
    DeviceBuffer<std::uint32_t> kept_offsets_;  // gather_members: packed rows per listed anchor
    DeviceBuffer<unsigned char> temp_;
    DeviceBuffer<float> gathered_;      // grown on demand, with its host copy
    PinnedBuffer<float> gathered_host_;
    SeedScratch seed_scratch_;
    NearestScratch nearest_scratch_;
    NarrowScratch narrow_scratch_;
    SplitScratch split_scratch_;

    // Scalars: what crosses the bus per iteration.
    DeviceBuffer<unsigned long long> changed_;
    DeviceBuffer<unsigned> uncertain_counts_;
    DeviceBuffer<unsigned> max_anchor_norm_bits_;
    DeviceBuffer<unsigned> anchor_head_maxima_;  // largest head norm and rounding (launch_anchor_operands)
    DeviceBuffer<unsigned> anchor_flags_;
    DeviceBuffer<double> energy_sum_;
    DeviceBuffer<double> trim_;
    DeviceBuffer<std::int64_t> selected_;
    // Their host ends, in one pinned allocation for the backend's life: each cudaMallocHost costs a
    // quarter of a millisecond, five of them more than the rest of a small upload.
    PinnedBuffer<HostScalars> host_{1};
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(int gpu, FastKernel kernel, std::size_t gather_floats,
                                           GpuKernels kernels) {
    return std::make_unique<CudaBackend>(gpu, kernel, gather_floats, kernels);
}

}  // namespace vlattice
