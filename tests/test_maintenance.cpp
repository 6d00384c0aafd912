// Merge, split and re-seed on hand-built anchors and statistics.
#include "support.hpp"

#include "cpu/exact_assign.hpp"
#include "fit/maintenance.hpp"

#include <catch2/catch.hpp>

#include <cstring>

using namespace vlattice;
using namespace vlattice::test;

namespace {

Matrix rows(std::initializer_list<std::vector<float>> values) {
    Matrix m(values.size(), values.begin()->size());
    std::size_t j = 0;
    for (const auto& v : values) {
        std::memcpy(m.row(j++), v.data(), v.size() * sizeof(float));
    }
    return m;
}

// A SplitSource from the members of one anchor, split on the CPU.
template <class PerAnchor>
SplitSource each(PerAnchor per_anchor) {
    return [per_anchor](const std::vector<std::uint32_t>& anchors) {
        std::vector<Matrix> members;
        for (std::uint32_t j : anchors) {
            members.push_back(per_anchor(j));
        }
        return split_each(members);
    };
}

// Members of an anchor: two tight blobs around (-5, 0) and (5, 0) for anchor 0, one point elsewhere.
Matrix two_blobs(std::uint32_t anchor) {
    if (anchor != 0) {
        return rows({{0.0f, 0.0f}});
    }
    Matrix x(40, 2);
    for (std::size_t i = 0; i < 40; ++i) {
        x.row(i)[0] = (i % 2 ? 5.0f : -5.0f) + 0.01f * static_cast<float>(i % 7);
        x.row(i)[1] = 0.01f * static_cast<float>(i % 3);
    }
    return x;
}

// maintain() on anchors held here: rows and spacing from the matrix, computed on the CPU, and the
// changes written back into it. The ids of the rows it fetched go to `fetched` when given.
MaintenanceResult maintain_here(Matrix& anchors, const AnchorStats& stats, const AnnealConfig& config,
                                const SplitSource& splits, std::vector<std::uint32_t>* fetched = nullptr) {
    const auto rows_of = [&](const std::vector<std::uint32_t>& ids) {
        if (fetched != nullptr) {
            fetched->insert(fetched->end(), ids.begin(), ids.end());
        }
        return select_rows(anchors, ids);
    };
    const MaintenanceResult r = maintain(stats, anchors.cols, config, rows_of, splits, [&](const std::vector<std::uint32_t>& live) {
        return cpu::nearest_rows(select_rows(anchors, live));
    });
    REQUIRE(r.changed.rows == r.changed_rows.size());
    for (std::size_t t = 0; t < r.changed_rows.size(); ++t) {
        std::memcpy(anchors.row(r.changed_rows[t]), r.changed.row(t), anchors.cols * sizeof(float));
    }
    return r;
}

AnchorStats stats_of(std::vector<std::uint32_t> count, std::vector<double> variance) {
    AnchorStats s;
    s.kept = count;
    s.count = std::move(count);
    s.variance = std::move(variance);
    return s;
}

}  // namespace

TEST_CASE("an empty anchor is re-seeded by splitting the anchor of largest error", "[maintenance]") {
    Matrix anchors = rows({{0, 0}, {100, 100}, {-100, 100}, {50, -50}});
    const AnchorStats stats = stats_of({400, 100, 100, 0}, {25.0, 1.0, 1.0, 0.0});
    const MaintenanceResult r = maintain_here(anchors, stats, AnnealConfig{}, each(two_blobs));
    CHECK(r.reseeded == 1);
    CHECK(r.changed_rows == std::vector<std::uint32_t>{0, 3});
    const float left = anchors.row(0)[0];
    const float right = anchors.row(3)[0];
    CHECK(std::min(left, right) == Approx(-5.0f).margin(0.1));
    CHECK(std::max(left, right) == Approx(5.0f).margin(0.1));
}

TEST_CASE("two nearly coincident anchors merge into their count-weighted mean", "[maintenance]") {
    Matrix anchors = rows({{0, 0}, {10, 0}, {10.01f, 0}, {0, 10}});
    AnnealConfig config;
    config.merge_factor = 0.1;
    const AnchorStats stats = stats_of({10, 30, 10, 10}, {1.0, 1.0, 1.0, 1.0});
    // No member of anchor 0 can be split (one point), so the freed slot is not refilled.
    std::vector<std::uint32_t> fetched;
    const MaintenanceResult r =
        maintain_here(anchors, stats, config, each([](std::uint32_t) { return rows({{0, 0}}); }), &fetched);
    CHECK(r.merged == 1);
    // Only the merged pair's rows were read, and only those two rows change.
    CHECK(fetched == std::vector<std::uint32_t>{1, 2});
    CHECK(r.changed_rows == std::vector<std::uint32_t>{1, 2});
    CHECK(anchors.row(1)[0] == Approx(10.0025f));
    // The freed slot duplicates the merged anchor so that it wins no points.
    CHECK(anchors.row(2)[0] == anchors.row(1)[0]);
}

TEST_CASE("an anchor far above the mean count is split into the cheapest anchor's slot", "[maintenance]") {
    // Anchor 3 sits next to anchor 2 and has few members: removing it costs least.
    Matrix anchors = rows({{0, 0}, {100, 0}, {0, 100}, {0, 103}, {100, 100}});
    const AnchorStats stats = stats_of({1000, 20, 20, 2, 20}, {25.0, 1.0, 1.0, 1.0, 1.0});
    AnnealConfig config;
    config.merge_factor = 0.0;  // anchors 2 and 3 would otherwise merge first
    const MaintenanceResult r = maintain_here(anchors, stats, config, each(two_blobs));
    CHECK(r.split == 1);
    CHECK(r.changed_rows == std::vector<std::uint32_t>{0, 3});
}

TEST_CASE("of anchors that cost the same to remove, the split takes the lowest index's slot", "[maintenance]") {
    // Anchors 2 and 3 are each other's nearest, 3 apart, with 2 members each: both cost 18.
    Matrix anchors = rows({{0, 0}, {100, 0}, {0, 100}, {0, 103}, {100, 100}});
    const AnchorStats stats = stats_of({1000, 20, 2, 2, 20}, {25.0, 1.0, 1.0, 1.0, 1.0});
    AnnealConfig config;
    config.merge_factor = 0.0;
    const MaintenanceResult r = maintain_here(anchors, stats, config, each(two_blobs));
    CHECK(r.split == 1);
    CHECK(r.changed_rows == std::vector<std::uint32_t>{0, 2});
}

TEST_CASE("anchors whose members are all one point are left alone", "[maintenance]") {
    Matrix anchors = rows({{1, 1}, {2, 2}});
    const Matrix before = anchors;
    const AnchorStats stats = stats_of({10, 0}, {0.0, 0.0});
    const MaintenanceResult r = maintain_here(anchors, stats, AnnealConfig{}, each([](std::uint32_t) {
        return rows({{1, 1}, {1, 1}, {1, 1}});
    }));
    CHECK(r.reseeded == 0);
    CHECK(r.changed_rows.empty());
    CHECK(anchors.data == before.data);
}
