// A backend decorator that hands back anchors different from the ones it computes with, as a faulty
// device would: the validation tests use it to show that the CPU's recomputation catches it.
#pragma once

#include "vlattice/backend.hpp"

#include <memory>
#include <utility>

namespace vlattice::test {

class PerturbedAnchors final : public Backend {
public:
    explicit PerturbedAnchors(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}
    const char* name() const override { return "perturbed"; }
    void upload_points(const Matrix& points, const RunSetup& setup) override { inner_->upload_points(points, setup); }
    void upload_anchors(const Matrix& anchors) override { inner_->upload_anchors(anchors); }
    void upload_anchor_rows(const Matrix& values, const std::vector<std::uint32_t>& rows) override {
        inner_->upload_anchor_rows(values, rows);
    }
    Matrix download_anchors() override {
        Matrix anchors = inner_->download_anchors();
        // Far beyond the data: moving an anchor by s along one axis changes the energy of its k
        // members by k (s^2 - 2 s (mean - anchor)) on that axis, which nearly cancels for a small s
        // in an iteration where the anchor lags about s / 2 behind their mean (seen with s = 0.5:
        // a relative change of 4.9e-6, under the validation's 1e-5).
        anchors.row(0)[0] += 1000.0f;
        return anchors;
    }
    AssignStats assign() override { return inner_->assign(); }
    void robust_reduce(double trim) override { inner_->robust_reduce(trim); }
    AnchorStats download_stats() override { return inner_->download_stats(); }
    void update(double eta) override { inner_->update(eta); }
    double energy() override { return inner_->energy(); }
    std::vector<std::uint32_t> download_assignments() override { return inner_->download_assignments(); }
    void seed_anchors(const Matrix& points, std::size_t m, std::size_t sample_size, std::uint64_t seed) override {
        inner_->seed_anchors(points, m, sample_size, seed);
    }
    std::vector<Matrix> gather_members(const std::vector<std::uint32_t>& anchors, std::size_t limit) override {
        return inner_->gather_members(anchors, limit);
    }
    NearestRows nearest_rows(const Matrix& rows) override { return inner_->nearest_rows(rows); }

private:
    std::unique_ptr<Backend> inner_;
};

}  // namespace vlattice::test
