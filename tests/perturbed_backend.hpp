// Backend decorators that hand back something other than what they compute with, as a faulty device
// would: the validation tests use them to show that the CPU's recomputation, and the loop's own
// checks, catch it.
#pragma once

#include "vlattice/backend.hpp"

#include <limits>
#include <memory>
#include <utility>

namespace vlattice::test {

// Forwards every call to the wrapped backend; a decorator overrides the calls it falsifies.
class ForwardingBackend : public Backend {
public:
    explicit ForwardingBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}
    void upload_points(const PointView& points, const RunSetup& setup) override { inner_->upload_points(points, setup); }
    void upload_anchors(const Matrix& anchors) override { inner_->upload_anchors(anchors); }
    void upload_anchor_rows(const Matrix& values, const std::vector<std::uint32_t>& rows) override {
        inner_->upload_anchor_rows(values, rows);
    }
    Matrix download_anchors() override { return inner_->download_anchors(); }
    AssignStats assign() override { return inner_->assign(); }
    void robust_reduce(double trim) override { inner_->robust_reduce(trim); }
    AnchorStats download_stats() override { return inner_->download_stats(); }
    void update(double eta) override { inner_->update(eta); }
    double energy() override { return inner_->energy(); }
    std::vector<std::uint32_t> download_assignments() override { return inner_->download_assignments(); }
    void seed_anchors(const PointView& points, std::size_t m, std::size_t sample_size, std::uint64_t seed) override {
        inner_->seed_anchors(points, m, sample_size, seed);
    }
    std::vector<Matrix> gather_members(const std::vector<std::uint32_t>& anchors, std::size_t limit) override {
        return inner_->gather_members(anchors, limit);
    }
    NearestRows nearest_rows(const Matrix& rows) override { return inner_->nearest_rows(rows); }

private:
    std::unique_ptr<Backend> inner_;
};

class PerturbedAnchors final : public ForwardingBackend {
public:
    using ForwardingBackend::ForwardingBackend;
    const char* name() const override { return "perturbed"; }
    Matrix download_anchors() override {
        Matrix anchors = ForwardingBackend::download_anchors();
        // Far beyond the data: moving an anchor by s along one axis changes the energy of its k
        // members by k (s^2 - 2 s (mean - anchor)) on that axis, which nearly cancels for a small s
        // in an iteration where the anchor lags about s / 2 behind their mean (seen with s = 0.5:
        // a relative change of 4.9e-6, under the validation's 1e-5).
        anchors.row(0)[0] += 1000.0f;
        return anchors;
    }
};

// From the assign of iteration `from_assign` (0-based) on, the assign reports a NaN energy. With
// `nan_at_end`, the final energy() is NaN, and so is a coordinate of the anchors handed back after
// it, so that the CPU's recomputation is NaN as well.
class NonFiniteEnergy final : public ForwardingBackend {
public:
    NonFiniteEnergy(std::unique_ptr<Backend> inner, int from_assign, bool nan_at_end)
        : ForwardingBackend(std::move(inner)), from_assign_(from_assign), nan_at_end_(nan_at_end) {}
    const char* name() const override { return "non-finite"; }
    AssignStats assign() override {
        AssignStats stats = ForwardingBackend::assign();
        if (assigns_++ >= from_assign_) {
            stats.energy = std::numeric_limits<double>::quiet_NaN();
        }
        return stats;
    }
    double energy() override {
        ended_ = true;
        return nan_at_end_ ? std::numeric_limits<double>::quiet_NaN() : ForwardingBackend::energy();
    }
    Matrix download_anchors() override {
        Matrix anchors = ForwardingBackend::download_anchors();
        if (nan_at_end_ && ended_) {
            anchors.row(0)[0] = std::numeric_limits<float>::quiet_NaN();
        }
        return anchors;
    }

private:
    int from_assign_;
    bool nan_at_end_;
    int assigns_ = 0;
    bool ended_ = false;
};

}  // namespace vlattice::test
