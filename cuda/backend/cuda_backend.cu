// The CUDA backend: a facade that checks the order of calls and sequences the stages
// (backend/stages.hpp), which own the device memory and check what they are given.
#include "vlattice/cuda_backend.hpp"

#include "fit/init.hpp"
#include "fit/member_lists.hpp"

#include "backend/shared_rows.hpp"
#include "backend/stages.hpp"
#include "codes/product_encode.cuh"
#include "runtime/cuda_check.hpp"
#include "runtime/kernel_family.hpp"
#include "runtime/stream.hpp"

#include <optional>
#include <string>

namespace vlattice {

namespace {

// Siblings fitting side by side (product-code training): enough streams that the GPU has work while
// each fit's host steps run, few enough that their buffers stay small.
constexpr std::size_t kSiblings = 8;

int select_device(int gpu) {
    CUDA_CHECK(cudaSetDevice(gpu));
    return gpu;
}

// With a RowShare (total_rows > 0), the backend holds one rank's rows and every call gives what one
// process holding all of them computes (backend/shared_rows.hpp).
class CudaBackend final : public Backend {
public:
    CudaBackend(int gpu, FastKernel kernel, std::size_t gather_floats, GpuKernels kernels, std::size_t memory_limit,
                const RowShare& share)
        : gpu_(select_device(gpu)),
          gpu_shape_(cuda::gpu_shape(gpu)),
          kernels_(cuda::resolve_kernels(kernels, gpu)),
          kernel_(kernel),
          gather_floats_(gather_floats),
          memory_limit_(memory_limit),
          shared_(share.total_rows > 0 ? std::optional<cuda::SharedRows>(share) : std::nullopt),
          stages_(gpu_, kernel, gather_floats, kernels_, gpu_shape_, memory_limit) {}

    // Frees the buffers on this backend's GPU, whatever device the thread uses by then, and only once
    // the work queued on its stream has run (update is never waited for). A destructor cannot report
    // a failure; after a fault the context is lost anyway.
    ~CudaBackend() override {
        static_cast<void>(cudaSetDevice(gpu_));
        static_cast<void>(cudaStreamSynchronize(stream_.get()));
    }

    const char* name() const override { return "cuda"; }

    RowShare row_share() const override { return shared_ ? shared_->share() : RowShare{}; }

    void upload_points(const PointView& points, const RunSetup& setup) override {
        use_device();
        cuda::PointStage::check(points);
        if (shared_) {
            shared_->hold(points.rows);
        }
        // Points of the shape held go into the same buffers, and the anchors' buffers stay for a
        // seeding of as many anchors: sub-space fits upload many sets of one shape, and every
        // cudaFree waits for the whole device, the other fits' streams included.
        const cuda::PointPlan plan =
            stages_.plan_points(points.rows, points.cols, points.type(), setup.format.storage);
        if (stages_.points.holds(points.rows, points.cols, setup.format.storage, plan)) {
            stream_.synchronize();
            m_ = 0;  // the anchors were the old points'
            have_stats_ = false;
        } else {
            release_anchors();
            stages_.allocate_points(points.rows, points.cols, points.type(), setup.format.storage, plan);
        }
        stages_.points.upload(points, setup.format, stream_.get());
        precision_ = setup.precision;
        assigned_ = false;
        stages_.assign.restart();
        ++generation_;
    }

    std::string points_placement() const override {
        return cuda::describe_plan(stages_.points.plan(), stages_.points.host_points().type(), gpu_);
    }

    void upload_anchors(const Matrix& anchors) override {
        begin("upload_anchors", Needs::points);
        cuda::AnchorStage::check(anchors, d());
        hold_anchors(anchors.rows);
        stages_.anchors.upload(anchors, stream_.get());
        stream_.synchronize();
        have_stats_ = false;
    }

    // k-means++ on the device, pick for pick the CPU's; only a sample where every weight reaches zero
    // (fewer distinct points than anchors) takes the CPU's path, which then draws differently.
    void seed_anchors(const PointView& points, std::size_t m, std::size_t sample_size, std::uint64_t seed) override {
        begin("seed_anchors", Needs::points);
        require(points.rows == n() && points.cols == d(),
                "seed_anchors got " + std::to_string(points.rows) + " x " + std::to_string(points.cols) +
                    " points, not the uploaded " + std::to_string(n()) + " x " + std::to_string(d()));
        require(m > 0 && m < cuda::kMaxRows, "seed_anchors needs 1 to 2^31 anchors, got " + std::to_string(m));
        if (shared_) {
            upload_anchors(shared_->seed(points, m, sample_size, seed));
            return;
        }
        const SeedingDraws draws = draw_seeding(n(), m, sample_size, seed);
        hold_anchors(m);
        stages_.seeding.queue(stages_.points, stages_.anchors, draws, stream_.get());
        stages_.anchors.queue_forget_prior(stream_.get());
        // The first iteration's graphs are captured while the device seeds (k-means++ at
        // Fashion-MNIST: 17 ms), instead of behind that iteration's own work, which left the device
        // idle while the host captured. A hot start trims, and a reduce that turns out not to is
        // captured when it comes.
        stages_.assign.prepare(stages_.points, stages_.anchors, precision_ == AssignPrecision::exact, generation_,
                               stream_.get());
        stages_.reduce.prepare(stages_.points, stages_.anchors, generation_, stream_.get());
        const bool fell_through = stages_.seeding.fell_through(stream_.get());
        have_stats_ = false;
        if (fell_through) {
            upload_anchors(kmeans_plus_plus(points, m, sample_size, seed));
        }
    }

    void upload_anchor_rows(const Matrix& values, const std::vector<std::uint32_t>& rows) override {
        begin("upload_anchor_rows", Needs::anchors);
        stages_.anchors.upload_rows(values, rows, stream_.get());
    }

    Matrix download_anchors() override {
        begin("download_anchors", Needs::anchors);
        return stages_.anchors.download(stream_.get());
    }

    Matrix download_anchor_rows(const std::vector<std::uint32_t>& rows) override {
        begin("download_anchor_rows", Needs::anchors);
        return stages_.anchors.download_rows(rows, stream_.get());
    }

    AssignStats assign() override {
        begin("assign", Needs::anchors);
        const AssignStats stats =
            stages_.assign.run(stages_.points, stages_.anchors, precision_ == AssignPrecision::exact, generation_,
                               stream_.get());
        assigned_ = true;
        return shared_ ? shared_->assigned(stats, stages_.points, stream_.get()) : stats;
    }

    void robust_reduce(double trim) override {
        begin("robust_reduce", Needs::assignment);
        require(trim >= 0.0 && trim < 1.0, "trim must be in [0, 1), got " + std::to_string(trim));
        if (shared_) {
            shared_->reduce(stages_, trim, stream_.get());
        } else {
            stages_.reduce.run(stages_.points, stages_.anchors, trim, generation_, stream_.get());
        }
        have_stats_ = true;
    }

    AnchorStats download_stats() override {
        use_device();
        return have_stats_ ? stages_.reduce.download(m_, stream_.get()) : AnchorStats{};
    }

    // Queued only: whatever reads the anchors next waits on the stream, and the host reads nothing
    // from the update, so a wait here would only leave the device idle between two launches.
    void update(double eta) override {
        use_device();
        require(have_stats_, "update needs a robust_reduce of the current anchors first");
        stages_.anchors.queue_update(stages_.reduce.means(), stages_.reduce.kept(), eta, stream_.get());
    }

    double energy() override {
        begin("energy", Needs::assignment);
        stages_.points.queue_block_sums(stages_.anchors.data(), stream_.get());
        if (shared_) {
            return shared_->energy(stages_.points, stream_.get());
        }
        stages_.points.queue_energy_sum(stream_.get());
        stream_.synchronize();
        return stages_.points.energy_sum() / static_cast<double>(n());
    }

    std::vector<std::uint32_t> download_assignments() override {
        begin("download_assignments", Needs::points);
        return stages_.points.download_assignment(stream_.get());
    }

    // Streamed points are gathered where they all are, on the host; split_members then splits them on
    // the CPU, which gives the device's splits bit for bit.
    std::vector<Matrix> gather_members(const std::vector<std::uint32_t>& anchors, std::size_t limit) override {
        require_listed(anchors, "gather_members");
        if (shared_) {
            return shared_->gather_members(stages_.points, m_, anchors, limit, stream_.get());
        }
        if (stages_.points.streamed()) {
            return gather_member_rows(stages_.points.host_points(), stages_.points.download_assignment(stream_.get()),
                                      m_, anchors, limit);
        }
        const cuda::SortSpace sort = stages_.reduce.sort_space();
        return stages_.maintenance.gather(stages_.points, sort, m_, anchors, limit, stream_.get());
    }

    std::vector<MemberSplit> split_members(const std::vector<std::uint32_t>& anchors, std::size_t limit) override {
        require_listed(anchors, "split_members");
        if (shared_ || stages_.points.streamed()) {
            return Backend::split_members(anchors, limit);
        }
        const cuda::SortSpace sort = stages_.reduce.sort_space();
        return stages_.maintenance.split(stages_.points, sort, m_, anchors, limit, stream_.get());
    }

    // The rows go up into buffers of their own, so nothing the run keeps on the device is touched.
    std::vector<std::uint8_t> encode_product(const ProductCodebook& book, const Matrix& points, const Matrix& anchors,
                                             const std::vector<std::uint32_t>& assignments) override {
        use_device();
        return cuda::encode_product(book, points, anchors, assignments, stream_.get());
    }

    Matrix rotate_rows(const Matrix& rotation, const Matrix& rows) override {
        use_device();
        require(rotation.cols == rows.cols, "rotate_rows: the rotation has " + std::to_string(rotation.cols) +
                                                " columns for rows of " + std::to_string(rows.cols));
        return cuda::rotate_rows(rotation, rows, stream_.get());
    }

    // Sub-space fits are small: several streams keep the GPU busy while each waits on its host.
    std::size_t side_by_side() const override { return kSiblings; }
    std::unique_ptr<Backend> sibling() const override {
        return std::make_unique<CudaBackend>(gpu_, kernel_, gather_floats_, kernels_, memory_limit_, RowShare{});
    }
    bool trains_side_by_side() const override { return true; }

    NearestRows nearest_rows(const Matrix& rows) override {
        begin("nearest_rows", Needs::points);
        return stages_.nearest.of_rows(rows, d(), stream_.get());
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
        begin("nearest_anchors", Needs::anchors);
        return stages_.nearest.of_anchors(stages_.anchors, stages_.assign.operands(), stages_.points, stream_.get());
    }

private:
    std::size_t n() const { return stages_.points.n(); }
    std::size_t d() const { return static_cast<std::size_t>(stages_.points.d()); }

    // The current device is per host thread, and the caller may have changed it since the last call.
    void use_device() const { CUDA_CHECK(cudaSetDevice(gpu_)); }

    // Calls out of order are a programming error in the caller; they are reported, never undefined.
    static void require(bool ok, const std::string& what) {
        if (!ok) {
            throw Error("cuda backend: " + what);
        }
    }
    enum class Needs { points, anchors, assignment };
    // Makes the GPU current and checks that `call` comes after what it needs.
    void begin(const char* call, Needs needs) const {
        use_device();
        require(n() > 0, std::string(call) + " before upload_points");
        require(needs == Needs::points || m_ > 0, std::string(call) + " before upload_anchors");
        require(needs != Needs::assignment || assigned_,
                std::string(call) + " needs an assign with the current anchor count first");
    }
    void require_listed(const std::vector<std::uint32_t>& anchors, const char* call) const {
        begin(call, Needs::anchors);
        require_distinct_anchors(anchors, m_, name(), call);
    }

    // m anchors from here on, in the buffers there are when they were sized for m (and the points
    // held since), else in new ones.
    void hold_anchors(std::size_t m) {
        if (m == m_) {
            return;
        }
        assigned_ = false;  // old ids may point past the new anchors
        if (m != stages_.anchors.m()) {
            release_anchors();
            stages_.allocate_anchors(m);
        }
        stream_.synchronize();
        m_ = m;
        have_stats_ = false;
        ++generation_;
    }

    void release_anchors() {
        stream_.synchronize();  // an update may still be queued on these buffers
        m_ = 0;
        have_stats_ = false;
        ++generation_;  // captured graphs name the buffers that go here
        stages_.release_anchors();
    }

    int gpu_;
    cuda::GpuShape gpu_shape_;
    GpuKernels kernels_;  // resolved: never automatic
    FastKernel kernel_;
    std::size_t gather_floats_;
    std::size_t memory_limit_;
    cuda::Stream stream_;
    // Bumped whenever buffers are replaced, so that no captured graph outlives what it names.
    std::uint64_t generation_ = 0;
    std::size_t m_ = 0;        // anchors held (0: none), in buffers stages_.anchors sized for them
    bool assigned_ = false;    // the points' anchors are ids valid for the current anchor count
    bool have_stats_ = false;  // a robust_reduce ran since the anchors were last replaced
    AssignPrecision precision_ = AssignPrecision::exact;
    std::optional<cuda::SharedRows> shared_;  // with a RowShare only

    cuda::Stages stages_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(int gpu, FastKernel kernel, std::size_t gather_floats,
                                           GpuKernels kernels, std::size_t memory_limit, const RowShare& share) {
    return std::make_unique<CudaBackend>(gpu, kernel, gather_floats, kernels, memory_limit, share);
}

}  // namespace vlattice
