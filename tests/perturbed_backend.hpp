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
        // Far beyond the data: moving an anchor by s changes its members' energy by
        // s^2 - 2 s (mean - anchor) each, which a small s can cancel in an iteration where the
        // anchor lags s / 2 behind its members' mean (seen with s = 0.5).
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
