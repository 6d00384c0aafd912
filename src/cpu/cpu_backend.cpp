#include "vlattice/cpu_backend.hpp"

#include "vlattice/anneal.hpp"

#include "cpu/exact_assign.hpp"
#include "cpu/robust_reduce.hpp"
#include "fit/init.hpp"
#include "fit/member_lists.hpp"
#include "numeric.hpp"
#include "parallel/row_share.hpp"
#include "parallel/shared_sum.hpp"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace vlattice {

namespace {

constexpr std::uint32_t kUnassigned = std::numeric_limits<std::uint32_t>::max();

class CpuBackend final : public Backend {
public:
    // OpenBLAS maps a buffer for every thread up to the count it is given, at once: the count it
    // gets has to be one that fits (plan_cpu_threads).
    CpuBackend(int threads, const RowShare& share)
        : threads_(plan_cpu_threads(threads).threads), whole_(share.total_rows == 0), share_(share) {
        omp_set_num_threads(threads_);
        openblas_set_num_threads(threads_);
    }

    const char* name() const override { return "cpu"; }

    // A sibling runs on its caller's thread alone: inside the parallel loop that drives the siblings
    // OpenMP does not nest and OpenBLAS runs single-threaded, so it leaves the thread counts alone.
    std::size_t side_by_side() const override { return static_cast<std::size_t>(threads_); }
    std::unique_ptr<Backend> sibling() const override { return std::unique_ptr<Backend>(new CpuBackend(Sibling{})); }
    RowShare row_share() const override { return whole_ ? RowShare{} : share_; }

    // The CPU works on the caller's points in place, in their stored type: a copy would double the
    // memory of a run, or more. They come already rounded to the run's storage; each kernel widens
    // the rows it reads to float32.
    void upload_points(const PointView& points, const RunSetup& setup) override {
        require(points.rows > 0 && points.cols > 0 && points.data() != nullptr,
                "no points to upload, or a view without values");
        require(points.matrix() == nullptr || points.matrix()->data.size() == points.rows * points.cols,
                "a matrix whose size does not match its shape");
        points_ = points;
        if (whole_) {
            share_ = whole_set(points.rows);
        }
        require(share_.first_row + points.rows <= share_.total_rows,
                "rows " + std::to_string(share_.first_row) + " to " + std::to_string(share_.first_row + points.rows) +
                    " are not rows of a set of " + std::to_string(share_.total_rows));
        uploaded_ = true;
        precision_ = setup.precision;
        norms_.resize(points.rows);
#pragma omp parallel for schedule(static)
        for (std::size_t i = 0; i < points.rows; ++i) {
            thread_local std::vector<float> scratch;
            scratch.resize(points.cols);
            norms_[i] = static_cast<float>(squared_norm(points.row(i, scratch.data()), points.cols));
        }
        assignment_.assign(points.rows, kUnassigned);
        distance_.assign(points.rows, 0.0);
        others_.assign(points.rows, 0.0);
        assigned_ = false;
    }

    void upload_anchors(const Matrix& anchors) override {
        require(uploaded_, "upload_anchors before upload_points");
        require(anchors.rows > 0 && anchors.cols == points_.cols,
                "anchors are " + std::to_string(anchors.rows) + " x " + std::to_string(anchors.cols) +
                    ", expected at least one row of " + std::to_string(points_.cols));
        // Old ids may point past a smaller set of anchors: reduce and energy wait for the next assign.
        assigned_ = assigned_ && anchors.rows == anchors_.rows;
        anchors_ = anchors;
        moved_.assign(anchors.rows, std::numeric_limits<double>::infinity());
        means_.clear();
        stats_ = AnchorStats{};
    }

    void seed_anchors(const PointView& points, std::size_t m, std::size_t sample_size, std::uint64_t seed) override {
        upload_anchors(kmeans_plus_plus(share_, points, m, sample_size, seed));
    }

    void upload_anchor_rows(const Matrix& values, const std::vector<std::uint32_t>& rows) override {
        require(values.cols == anchors_.cols && values.rows == rows.size(),
                "upload_anchor_rows needs one row of the anchors' dimension per listed row");
        require_rows_below(rows, anchors_.rows, name(), "upload_anchor_rows");
        for (std::size_t r = 0; r < rows.size(); ++r) {
            std::memcpy(anchors_.row(rows[r]), values.row(r), anchors_.cols * sizeof(float));
            moved_[rows[r]] = std::numeric_limits<double>::infinity();
        }
    }

    Matrix download_anchors() override { return anchors_; }

    Matrix download_anchor_rows(const std::vector<std::uint32_t>& rows) override {
        require_rows_below(rows, anchors_.rows, name(), "download_anchor_rows");
        return select_rows(anchors_, rows);
    }

    AssignStats assign() override {
        require(uploaded_ && anchors_.rows > 0, "assign before upload_points and upload_anchors");
        assigned_ = true;
        AssignStats result;
        cpu::AssignBounds bounds{&moved_, &others_};
        result.changed =
            cpu::assign_nearest(points_, norms_, anchors_, precision_, assignment_, distance_, nullptr, &bounds);
        std::fill(moved_.begin(), moved_.end(), 0.0);
        std::uint64_t changed = result.changed;
        share_.ranks->sum(&changed, 1);
        result.changed = static_cast<std::size_t>(changed);
        result.energy = shared_sum(share_, points_.rows, [&](std::size_t i) { return distance_[i]; }) /
                        static_cast<double>(share_.total_rows);
        return result;
    }

    void robust_reduce(double trim) override {
        require(assigned_, "robust_reduce needs an assign of the current anchors first");
        require(trim >= 0.0 && trim < 1.0, "trim must be in [0, 1), got " + std::to_string(trim));
        cpu::robust_reduce(points_, share_.first_row, assignment_, distance_, anchors_, trim, *share_.ranks, means_,
                           stats_);
    }

    AnchorStats download_stats() override { return stats_; }

    void update(double eta) override {
        require(stats_.kept.size() == anchors_.rows, "update needs a robust_reduce of the current anchors first");
        const std::size_t d = anchors_.cols;
#pragma omp parallel for schedule(static)
        for (std::size_t j = 0; j < anchors_.rows; ++j) {
            if (stats_.kept[j] == 0) {
                continue;
            }
            float* anchor = anchors_.row(j);
            const double* mean = means_.data() + j * d;
            double step = 0.0;
            for (std::size_t k = 0; k < d; ++k) {
                const float moved = static_cast<float>(anchor[k] + eta * (mean[k] - anchor[k]));
                const double diff = static_cast<double>(moved) - static_cast<double>(anchor[k]);
                step += diff * diff;
                anchor[k] = moved;
            }
            // Rounded up, so that the assign's bounds hold (cpu::AssignBounds).
            moved_[j] += std::sqrt(step) * (1.0 + 1e-12);
        }
    }

    double energy() override {
        require(assigned_, "energy needs an assign of the current anchors first");
        return cpu_energy(share_, points_, anchors_, assignment_);
    }

    std::vector<std::uint32_t> download_assignments() override { return assignment_; }

    std::vector<Matrix> gather_members(const std::vector<std::uint32_t>& anchors, std::size_t limit) override {
        require(assigned_, "gather_members needs an assign of the current anchors first");
        require_distinct_anchors(anchors, anchors_.rows, name(), "gather_members");
        return gather_shared_members(share_, points_, assignment_, anchors_.rows, anchors, limit);
    }

    NearestRows nearest_rows(const Matrix& rows) override { return cpu::nearest_rows(rows); }

private:
    // Calls out of order are a programming error in the caller; they are reported, never undefined.
    static void require(bool ok, const std::string& what) {
        if (!ok) {
            throw Error("cpu backend: " + what);
        }
    }

    struct Sibling {};
    explicit CpuBackend(Sibling) : threads_(1) {}

    int threads_;
    // Without a share of its own, each upload's points are the whole set.
    bool whole_ = true;
    RowShare share_;
    PointView points_;
    bool uploaded_ = false;
    AssignPrecision precision_ = AssignPrecision::exact;
    bool assigned_ = false;
    std::vector<float> norms_;
    Matrix anchors_;
    // Since the last assign, per anchor, how far it has moved at most; and per point, a lower bound
    // on the distance to every anchor but its own (cpu::AssignBounds).
    std::vector<double> moved_;
    std::vector<double> others_;
    std::vector<std::uint32_t> assignment_;
    std::vector<double> distance_;
    std::vector<double> means_;
    AnchorStats stats_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int threads) {
    return std::make_unique<CpuBackend>(threads, RowShare{});
}

std::unique_ptr<Backend> make_cpu_backend(int threads, const RowShare& share) {
    return std::make_unique<CpuBackend>(threads, share);
}

}  // namespace vlattice
