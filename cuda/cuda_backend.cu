#include "vlattice/cuda_backend.hpp"

#include "init.hpp"

#include "anchor_rows.cuh"
#include "assign.cuh"
#include "cuda_check.hpp"
#include "device_buffer.hpp"
#include "point_distance.cuh"
#include "robust_reduce.cuh"
#include "seed_anchors.cuh"
#include "stream.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

namespace vlattice {

namespace {

using cuda::DeviceBuffer;
using cuda::PinnedBuffer;

// Point ids, segment offsets and chunk counts are 32-bit on the device.
constexpr std::size_t kMaxRows = std::size_t{1} << 31;
// A fast path is given up for a narrower one when more than 1/16 of the points need every anchor re-scored.
constexpr std::size_t kMaxAllAnchorShare = 16;

cuda::FastPath first_fast_path(FastKernel kernel) {
    switch (kernel) {
    case FastKernel::fp32:
        return cuda::FastPath::fp32;
    case FastKernel::tf32x3:
        return cuda::FastPath::tf32x3;
    case FastKernel::automatic:
    case FastKernel::tf32:
        break;
    }
    return cuda::FastPath::tf32;
}
// Points up to this size are uploaded without pinned staging: allocating and pinning the staging
// costs more than a pageable copy of a small set (10k x 128 on the H100 machine: init 17 -> 9 ms).
constexpr std::size_t kPageableUploadBytes = std::size_t{64} << 20;
// Each half of the double-buffered upload: large enough for full PCIe speed, small enough to pin cheaply.
constexpr std::size_t kStagingFloats = std::size_t{4} << 20;

std::string mib(std::size_t bytes) {
    return std::to_string((bytes + (std::size_t{1} << 20) - 1) >> 20) + " MiB";
}

// Adds up buffer sizes the way the allocator hands them out (2 MiB pages), so that a run that passes
// the check also gets its memory.
class Footprint {
public:
    template <class T>
    Footprint& add(std::size_t count) {
        constexpr std::size_t kPage = std::size_t{2} << 20;
        bytes_ += (count * sizeof(T) + kPage - 1) / kPage * kPage;
        return *this;
    }
    std::size_t bytes() const { return bytes_; }

private:
    std::size_t bytes_ = 0;
};

int select_device(int gpu) {
    CUDA_CHECK(cudaSetDevice(gpu));
    return gpu;
}

int multiprocessor_count(int gpu) {
    int count = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, gpu));
    return count;
}

class CudaBackend final : public Backend {
public:
    CudaBackend(int gpu, FastKernel kernel)
        : gpu_(select_device(gpu)), multiprocessors_(multiprocessor_count(gpu)), kernel_(kernel) {}

    // Frees the buffers on this backend's GPU, whatever device the thread uses by then.
    ~CudaBackend() override { static_cast<void>(cudaSetDevice(gpu_)); }

    CudaBackend(const CudaBackend&) = delete;
    CudaBackend& operator=(const CudaBackend&) = delete;

    const char* name() const override { return "cuda"; }

    void upload_points(const Matrix& points) override {
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
        release_anchor_buffers();
        allocate_point_buffers(points.rows, points.cols);
        copy_points_up(points);
        const cudaStream_t s = stream_.get();
        cuda::launch_squared_norms(points_.data(), n_, dim(), point_norms_.data(), nullptr, s);
        CUDA_CHECK(cudaMemsetAsync(assignment_.data(), 0xff, assignment_.bytes(), s));
        stream_.synchronize();
        assigned_ = false;
        fast_path_ = first_fast_path(kernel_);
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
            release_anchor_buffers();
            allocate_anchor_buffers(anchors.rows);
            // Old ids may point past the new anchors: reduce and energy wait for the next assign.
            assigned_ = false;
        }
        CUDA_CHECK(cudaMemcpyAsync(anchors_.data(), anchors.data.data(), anchors_.bytes(), cudaMemcpyHostToDevice,
                                   stream_.get()));
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
            release_anchor_buffers();
            allocate_anchor_buffers(m);
            assigned_ = false;  // old ids may point past the new anchors
        }
        const std::vector<std::uint32_t> sample(draws.sample.begin(), draws.sample.end());
        DeviceBuffer<std::uint32_t> sample_ids(s);
        DeviceBuffer<double> uniforms(std::max<std::size_t>(draws.uniforms.size(), 1));
        DeviceBuffer<double> nearest(s);
        DeviceBuffer<std::uint32_t> owner(s);
        DeviceBuffer<double> gap(m);
        DeviceBuffer<double> block_sums(cuda::seed_block_count(s));
        DeviceBuffer<std::uint32_t> chosen(1);
        DeviceBuffer<int> degenerate(1);
        const cudaStream_t st = stream_.get();
        const auto first = static_cast<std::uint32_t>(draws.first);
        CUDA_CHECK(cudaMemcpyAsync(sample_ids.data(), sample.data(), s * sizeof(std::uint32_t), cudaMemcpyHostToDevice, st));
        CUDA_CHECK(cudaMemcpyAsync(uniforms.data(), draws.uniforms.data(), draws.uniforms.size() * sizeof(double),
                                   cudaMemcpyHostToDevice, st));
        CUDA_CHECK(cudaMemcpyAsync(chosen.data(), &first, sizeof first, cudaMemcpyHostToDevice, st));
        CUDA_CHECK(cudaMemsetAsync(degenerate.data(), 0, degenerate.bytes(), st));

        cuda::SeedArgs args;
        args.points = points_.data();
        args.d = dim();
        args.sample = sample_ids.data();
        args.s = s;
        args.m = m;
        args.uniforms = uniforms.data();
        args.anchors = anchors_.data();
        args.nearest = nearest.data();
        args.owner = owner.data();
        args.gap = gap.data();
        args.block_sums = block_sums.data();
        args.chosen = chosen.data();
        args.degenerate = degenerate.data();
        cuda::launch_seed_anchors(args, st);
        int fell_through = 0;
        CUDA_CHECK(cudaMemcpyAsync(&fell_through, degenerate.data(), sizeof fell_through, cudaMemcpyDeviceToHost, st));
        stream_.synchronize();
        have_stats_ = false;
        if (fell_through != 0) {
            upload_anchors(kmeans_plus_plus(points, m, sample_size, seed));
        }
    }

    void upload_anchor_rows(const Matrix& anchors, const std::vector<std::uint32_t>& rows) override {
        use_device();
        require_anchors("upload_anchor_rows");
        if (anchors.cols != d_) {
            throw Error("cuda backend: upload_anchor_rows got rows of " + std::to_string(anchors.cols) +
                        " values, expected " + std::to_string(d_));
        }
        for (std::uint32_t j : rows) {
            if (j >= m_ || j >= anchors.rows) {
                throw Error("cuda backend: upload_anchor_rows: row " + std::to_string(j) + " is outside the " +
                            std::to_string(m_) + " anchors");
            }
        }
        // Only the listed rows travel: packed here, scattered into place on the device, at most m at a time.
        const cudaStream_t s = stream_.get();
        std::vector<float> packed;
        for (std::size_t start = 0; start < rows.size(); start += m_) {
            const std::size_t count = std::min(m_, rows.size() - start);
            packed.resize(count * d_);
            for (std::size_t r = 0; r < count; ++r) {
                std::memcpy(packed.data() + r * d_, anchors.row(rows[start + r]), d_ * sizeof(float));
            }
            CUDA_CHECK(cudaMemcpyAsync(row_staging_.data(), packed.data(), packed.size() * sizeof(float),
                                       cudaMemcpyHostToDevice, s));
            CUDA_CHECK(cudaMemcpyAsync(row_ids_.data(), rows.data() + start, count * sizeof(std::uint32_t),
                                       cudaMemcpyHostToDevice, s));
            cuda::launch_scatter_rows(anchors_.data(), row_staging_.data(), row_ids_.data(), count, dim(), s);
            stream_.synchronize();
        }
    }

    Matrix download_anchors() override {
        use_device();
        require_anchors("download_anchors");
        return download_rows(anchors_.data(), m_);
    }

    AssignStats assign() override {
        use_device();
        require_anchors("assign");
        const cudaStream_t s = stream_.get();
        CUDA_CHECK(cudaMemsetAsync(max_anchor_norm_bits_.data(), 0, max_anchor_norm_bits_.bytes(), s));
        CUDA_CHECK(cudaMemsetAsync(uncertain_counts_.data(), 0, uncertain_counts_.bytes(), s));
        CUDA_CHECK(cudaMemsetAsync(changed_.data(), 0, changed_.bytes(), s));
        // Anchors change between assigns (update, uploads), so their norms are taken afresh here.
        cuda::launch_squared_norms(anchors_.data(), m_, dim(), anchor_norms_.data(), max_anchor_norm_bits_.data(), s);

        cuda::AssignArgs args;
        args.points = points_.data();
        args.point_norms = point_norms_.data();
        args.anchors = anchors_.data();
        args.anchor_norms = anchor_norms_.data();
        args.max_anchor_norm_bits = max_anchor_norm_bits_.data();
        args.n = n_;
        args.m = m_;
        args.d = dim();
        args.plan = plan_;
        args.candidates = candidates_.data();
        args.chosen = chosen_.data();
        args.uncertain = uncertain_.data();
        args.uncertain_counts = uncertain_counts_.data();
        args.multiprocessors = multiprocessors_;
        args.path = fast_path_;
        cuda::launch_exact_assign(args, s);

        cuda::PointDistanceArgs distances;
        distances.points = points_.data();
        distances.anchors = anchors_.data();
        distances.n = n_;
        distances.d = dim();
        distances.source = chosen_.data();
        distances.assignment = assignment_.data();
        distances.changed = changed_.data();
        distances.distance = distance_.data();
        distances.block_sums = block_sums_.data();
        cuda::launch_point_distances(distances, s);
        const double total = sum_block_sums();
        CUDA_CHECK(cudaMemcpyAsync(host_changed_.data(), changed_.data(), changed_.bytes(), cudaMemcpyDeviceToHost, s));
        CUDA_CHECK(cudaMemcpyAsync(host_uncertain_counts_.data(), uncertain_counts_.data(), uncertain_counts_.bytes(),
                                   cudaMemcpyDeviceToHost, s));
        stream_.synchronize();
        assigned_ = true;
        // tf32's window of uncertainty is ~100x the float32 one. Where anchors crowd around the
        // points (many nearly equidistant), too many points fall back to the all-anchor re-score, and
        // a kernel with a narrower window is faster: split tf32, then float32. The run keeps the
        // narrower one from then on. The assignments are exact either way.
        if (kernel_ == FastKernel::automatic && host_uncertain_counts_[1] > n_ / kMaxAllAnchorShare) {
            fast_path_ = fast_path_ == cuda::FastPath::tf32 ? cuda::FastPath::tf32x3 : cuda::FastPath::fp32;
        }

        AssignStats stats;
        stats.changed = static_cast<std::size_t>(host_changed_[0]);
        stats.energy = total / static_cast<double>(n_);
        return stats;
    }

    void robust_reduce(double trim) override {
        use_device();
        require_assignment("robust_reduce");
        if (!(trim >= 0.0 && trim < 1.0)) {
            throw Error("cuda backend: trim must be in [0, 1), got " + std::to_string(trim));
        }
        cuda::ReduceArgs args;
        args.points = points_.data();
        args.anchors = anchors_.data();
        args.distance = distance_.data();
        args.assignment = assignment_.data();
        args.n = n_;
        args.m = m_;
        args.d = dim();
        args.trim = trim;
        for (int b = 0; b < 2; ++b) {
            args.distance_keys[b] = distance_keys_[b].data();
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
        cuda::launch_robust_reduce(args, stream_.get());
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
        cuda::launch_update(anchors_.data(), means_.data(), kept_.data(), m_, dim(), eta, stream_.get());
        stream_.synchronize();
    }

    double energy() override {
        use_device();
        require_assignment("energy");
        cuda::PointDistanceArgs distances;
        distances.points = points_.data();
        distances.anchors = anchors_.data();
        distances.n = n_;
        distances.d = dim();
        distances.source = assignment_.data();
        distances.block_sums = block_sums_.data();
        cuda::launch_point_distances(distances, stream_.get());
        return sum_block_sums() / static_cast<double>(n_);
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

    Matrix gather_members(std::uint32_t anchor, std::size_t limit) override {
        use_device();
        require_anchors("gather_members");
        const cudaStream_t s = stream_.get();
        // The selection writes into sort scratch, which holds nothing between calls.
        std::uint32_t* members = members_[0].data();
        cuda::launch_select_members(assignment_.data(), n_, anchor, members, selected_.data(), temp_.data(),
                                    temp_.bytes(), s);
        CUDA_CHECK(
            cudaMemcpyAsync(host_selected_.data(), selected_.data(), selected_.bytes(), cudaMemcpyDeviceToHost, s));
        stream_.synchronize();
        const std::size_t count = std::min(limit, static_cast<std::size_t>(host_selected_[0]));
        if (count == 0) {
            return Matrix(0, d_);
        }
        if (gathered_.size() < count * d_) {
            gathered_ = DeviceBuffer<float>(count * d_);
        }
        cuda::launch_gather_rows(points_.data(), members, count, dim(), gathered_.data(), s);
        return download_rows(gathered_.data(), count);
    }

    // The rows go up into buffers of their own, so nothing the run keeps on the device is touched.
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
        const cuda::AssignPlan plan = cuda::plan_assign(count, count, multiprocessors_);
        nearest_scratch_.reserve(count, d_, static_cast<std::size_t>(plan.splits) * count,
                                 cuda::distance_block_count(count));
        NearestScratch& k = nearest_scratch_;
        const cudaStream_t s = stream_.get();
        CUDA_CHECK(cudaMemcpyAsync(k.rows.data(), rows.data.data(), count * d_ * sizeof(float), cudaMemcpyHostToDevice,
                                   s));
        CUDA_CHECK(cudaMemsetAsync(k.max_norm_bits.data(), 0, k.max_norm_bits.bytes(), s));
        CUDA_CHECK(cudaMemsetAsync(k.uncertain_counts.data(), 0, k.uncertain_counts.bytes(), s));
        cuda::launch_squared_norms(k.rows.data(), count, dim(), k.norms.data(), k.max_norm_bits.data(), s);

        cuda::AssignArgs args;
        args.points = k.rows.data();
        args.point_norms = k.norms.data();
        args.anchors = k.rows.data();
        args.anchor_norms = k.norms.data();
        args.max_anchor_norm_bits = k.max_norm_bits.data();
        args.n = count;
        args.m = count;
        args.d = dim();
        args.exclude_self = true;
        // Anchors crowd each other: in the tf32 window most rows would need every anchor re-scored.
        args.path = cuda::FastPath::fp32;
        args.plan = plan;
        args.candidates = k.candidates.data();
        args.chosen = k.chosen.data();
        args.uncertain = k.uncertain.data();
        args.uncertain_counts = k.uncertain_counts.data();
        args.multiprocessors = multiprocessors_;
        cuda::launch_exact_assign(args, s);

        cuda::PointDistanceArgs distances;
        distances.points = k.rows.data();
        distances.anchors = k.rows.data();
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

private:
    // Buffers of nearest_rows, grown on demand and kept for the next maintenance.
    struct NearestScratch {
        DeviceBuffer<float> rows;
        DeviceBuffer<float> norms;
        DeviceBuffer<unsigned> max_norm_bits;
        DeviceBuffer<cuda::Candidate> candidates;
        DeviceBuffer<std::uint32_t> chosen;
        DeviceBuffer<std::uint32_t> uncertain;
        DeviceBuffer<unsigned> uncertain_counts;
        DeviceBuffer<double> distance;
        DeviceBuffer<double> block_sums;

        void reserve(std::size_t count, std::size_t d, std::size_t candidate_count, std::size_t block_count) {
            if (rows.size() < count * d) {
                rows = DeviceBuffer<float>(count * d);
            }
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

    int dim() const { return static_cast<int>(d_); }

    // Rows of d floats into a new matrix, through pinned memory: pageable copies of the anchors ran
    // at 1.5 GB/s on the H100 machine.
    Matrix download_rows(const float* rows, std::size_t count) {
        const std::size_t values = count * d_;
        if (host_staging_.size() < values) {
            host_staging_ = PinnedBuffer<float>(values);
        }
        CUDA_CHECK(cudaMemcpyAsync(host_staging_.data(), rows, values * sizeof(float), cudaMemcpyDeviceToHost,
                                   stream_.get()));
        stream_.synchronize();
        Matrix out(count, d_);
        std::memcpy(out.data.data(), host_staging_.data(), values * sizeof(float));
        return out;
    }

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

    void allocate_point_buffers(std::size_t n, std::size_t d) {
        // Old buffers go first, so that their memory counts as free.
        points_ = {};
        point_norms_ = {};
        assignment_ = {};
        chosen_ = {};
        uncertain_ = {};
        distance_ = {};
        block_sums_ = {};
        for (int b = 0; b < 2; ++b) {
            distance_keys_[b] = {};
            anchor_keys_[b] = {};
            members_[b] = {};
        }
        n_ = 0;
        const std::size_t blocks = cuda::distance_block_count(n);
        Footprint need;
        need.add<float>(n * d).add<float>(n).add<std::uint32_t>(n).add<std::uint32_t>(n).add<std::uint32_t>(n);
        need.add<double>(n).add<double>(blocks);
        need.add<std::uint64_t>(n).add<std::uint64_t>(n).add<std::uint32_t>(n).add<std::uint32_t>(n);
        need.add<std::uint32_t>(n).add<std::uint32_t>(n);
        check_fits(need.bytes(), std::to_string(n) + " points of dimension " + std::to_string(d));

        points_ = DeviceBuffer<float>(n * d);
        point_norms_ = DeviceBuffer<float>(n);
        assignment_ = DeviceBuffer<std::uint32_t>(n);
        chosen_ = DeviceBuffer<std::uint32_t>(n);
        uncertain_ = DeviceBuffer<std::uint32_t>(n);
        distance_ = DeviceBuffer<double>(n);
        block_sums_ = DeviceBuffer<double>(blocks);
        for (int b = 0; b < 2; ++b) {
            distance_keys_[b] = DeviceBuffer<std::uint64_t>(n);
            anchor_keys_[b] = DeviceBuffer<std::uint32_t>(n);
            members_[b] = DeviceBuffer<std::uint32_t>(n);
        }
        if (changed_.size() == 0) {
            changed_ = DeviceBuffer<unsigned long long>(1);
            uncertain_counts_ = DeviceBuffer<unsigned>(2);
            max_anchor_norm_bits_ = DeviceBuffer<unsigned>(1);
            energy_sum_ = DeviceBuffer<double>(1);
            selected_ = DeviceBuffer<std::int64_t>(1);
            host_changed_ = PinnedBuffer<unsigned long long>(1);
            host_uncertain_counts_ = PinnedBuffer<unsigned>(2);
            host_energy_sum_ = PinnedBuffer<double>(1);
            host_selected_ = PinnedBuffer<std::int64_t>(1);
        }
        n_ = n;
        d_ = d;
    }

    void release_anchor_buffers() {
        m_ = 0;
        have_stats_ = false;
        anchors_ = {};
        anchor_norms_ = {};
        candidates_ = {};
        offsets_ = {};
        item_counts_ = {};
        item_offsets_ = {};
        count_ = {};
        kept_ = {};
        variance_ = {};
        means_ = {};
        partial_sums_ = {};
        partial_distance_ = {};
        row_staging_ = {};
        host_staging_ = {};
        row_ids_ = {};
        temp_ = {};
        gathered_ = {};
    }

    void allocate_anchor_buffers(std::size_t m) {
        const std::size_t d = d_;
        const cuda::AssignPlan plan = cuda::plan_assign(n_, m, multiprocessors_);
        const std::size_t chunks = cuda::max_member_chunks(n_, m);
        // CUB reports its scratch needs for given sizes; one buffer serves every call, one at a time.
        const std::size_t temp_bytes =
            std::max({cuda::robust_reduce_temp_bytes(n_, m), cuda::sum_temp_bytes(cuda::distance_block_count(n_)),
                      cuda::select_members_temp_bytes(n_), std::size_t{1}});
        Footprint need;
        need.add<float>(m * d).add<float>(m).add<cuda::Candidate>(static_cast<std::size_t>(plan.splits) * n_);
        need.add<std::uint32_t>(m + 1).add<std::uint32_t>(m + 1).add<std::uint32_t>(m + 1);
        need.add<std::uint32_t>(m).add<std::uint32_t>(m).add<double>(m).add<double>(m * d);
        need.add<double>(chunks * d).add<double>(chunks).add<float>(m * d).add<std::uint32_t>(m);
        need.add<unsigned char>(temp_bytes);
        check_fits(need.bytes(), std::to_string(m) + " anchors of dimension " + std::to_string(d) + " for " +
                                     std::to_string(n_) + " points");

        anchors_ = DeviceBuffer<float>(m * d);
        anchor_norms_ = DeviceBuffer<float>(m);
        candidates_ = DeviceBuffer<cuda::Candidate>(static_cast<std::size_t>(plan.splits) * n_);
        offsets_ = DeviceBuffer<std::uint32_t>(m + 1);
        item_counts_ = DeviceBuffer<std::uint32_t>(m + 1);
        item_offsets_ = DeviceBuffer<std::uint32_t>(m + 1);
        count_ = DeviceBuffer<std::uint32_t>(m);
        kept_ = DeviceBuffer<std::uint32_t>(m);
        variance_ = DeviceBuffer<double>(m);
        means_ = DeviceBuffer<double>(m * d);
        partial_sums_ = DeviceBuffer<double>(chunks * d);
        partial_distance_ = DeviceBuffer<double>(chunks);
        row_staging_ = DeviceBuffer<float>(m * d);
        host_staging_ = PinnedBuffer<float>(m * d);
        row_ids_ = DeviceBuffer<std::uint32_t>(m);
        temp_ = DeviceBuffer<unsigned char>(temp_bytes);
        plan_ = plan;
        m_ = m;
    }

    // Through pinned staging in two halves: the CPU fills one half while the DMA engine drains the other.
    // Small sets go straight from pageable memory: pinning the staging would take longer than the copy.
    void copy_points_up(const Matrix& points) {
        const std::size_t total = points.data.size();
        if (total * sizeof(float) <= kPageableUploadBytes) {
            CUDA_CHECK(cudaMemcpyAsync(points_.data(), points.data.data(), total * sizeof(float),
                                       cudaMemcpyHostToDevice, stream_.get()));
            stream_.synchronize();
            return;
        }
        const std::size_t chunk = std::min(total, kStagingFloats);
        PinnedBuffer<float> staging(2 * chunk);
        cuda::Event drained[2];
        const cudaStream_t s = stream_.get();
        std::size_t part = 0;
        for (std::size_t offset = 0; offset < total; offset += chunk, ++part) {
            const std::size_t half = part % 2;
            const std::size_t count = std::min(chunk, total - offset);
            float* buffer = staging.data() + half * chunk;
            if (part >= 2) {
                drained[half].synchronize();
            }
            std::memcpy(buffer, points.data.data() + offset, count * sizeof(float));
            CUDA_CHECK(cudaMemcpyAsync(points_.data() + offset, buffer, count * sizeof(float), cudaMemcpyHostToDevice,
                                       s));
            drained[half].record(s);
        }
        stream_.synchronize();
    }

    // Sums the per-block distance sums on the device and brings the total down.
    double sum_block_sums() {
        const cudaStream_t s = stream_.get();
        cuda::launch_sum(block_sums_.data(), block_sums_.size(), energy_sum_.data(), temp_.data(), temp_.bytes(), s);
        CUDA_CHECK(
            cudaMemcpyAsync(host_energy_sum_.data(), energy_sum_.data(), sizeof(double), cudaMemcpyDeviceToHost, s));
        stream_.synchronize();
        return host_energy_sum_[0];
    }

    int gpu_;
    int multiprocessors_;
    FastKernel kernel_;
    cuda::Stream stream_;

    std::size_t n_ = 0;
    std::size_t d_ = 0;  // checked to fit the kernels' int
    std::size_t m_ = 0;
    cuda::AssignPlan plan_;
    bool assigned_ = false;    // assignment_ holds ids valid for the current anchor count
    cuda::FastPath fast_path_ = cuda::FastPath::tf32;
    bool have_stats_ = false;  // a robust_reduce ran since the anchors were last replaced

    // Per point, for the whole run.
    DeviceBuffer<float> points_;
    DeviceBuffer<float> point_norms_;
    DeviceBuffer<std::uint32_t> assignment_;
    DeviceBuffer<std::uint32_t> chosen_;
    DeviceBuffer<std::uint32_t> uncertain_;
    DeviceBuffer<double> distance_;
    DeviceBuffer<double> block_sums_;
    DeviceBuffer<std::uint64_t> distance_keys_[2];
    DeviceBuffer<std::uint32_t> anchor_keys_[2];
    DeviceBuffer<std::uint32_t> members_[2];

    // Per anchor, reallocated when the anchor count changes.
    DeviceBuffer<float> anchors_;
    DeviceBuffer<float> anchor_norms_;
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
    PinnedBuffer<float> host_staging_;  // m x d at least; grown by download_rows
    DeviceBuffer<std::uint32_t> row_ids_;
    DeviceBuffer<unsigned char> temp_;
    DeviceBuffer<float> gathered_;
    NearestScratch nearest_scratch_;

    // Scalars: what crosses the bus per iteration.
    DeviceBuffer<unsigned long long> changed_;
    DeviceBuffer<unsigned> uncertain_counts_;
    DeviceBuffer<unsigned> max_anchor_norm_bits_;
    DeviceBuffer<double> energy_sum_;
    DeviceBuffer<std::int64_t> selected_;
    PinnedBuffer<unsigned long long> host_changed_;
    PinnedBuffer<unsigned> host_uncertain_counts_;
    PinnedBuffer<double> host_energy_sum_;
    PinnedBuffer<std::int64_t> host_selected_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(int gpu, FastKernel kernel) {
    return std::make_unique<CudaBackend>(gpu, kernel);
}

}  // namespace vlattice
