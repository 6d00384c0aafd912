// The trimmed reduce on rows split between ranks gives one process's bits: the kept members are
// chosen over all the ranks' rows and their sums are exact, whatever the split.
#include "cpu/robust_reduce.hpp"
#include "fit/exact_sums.hpp"
#include "reference.hpp"
#include "stored_points.hpp"
#include "support.hpp"
#include "thread_ranks.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <limits>

using namespace vlattice;
using namespace vlattice::test;

namespace {

struct Reduced {
    std::vector<double> means;
    AnchorStats stats;
};

// The reduce on `ranks` ranks, each holding rows [cut[r], cut[r + 1]); every rank's result must be
// the same, and it is returned.
Reduced reduce_split(const PointView& points, const ReferenceAssign& assigned, const Matrix& anchors, double trim,
                     const std::vector<std::size_t>& cut) {
    const int ranks = static_cast<int>(cut.size()) - 1;
    std::vector<Reduced> out(ranks);
    ThreadRanks(ranks).run([&](Collective& rank) {
        const int r = rank.rank();
        const std::size_t first = cut[r], rows = cut[r + 1] - cut[r];
        const char* values = static_cast<const char*>(points.data()) + first * points.pitch();
        const PointView mine(points.type(), values, rows, points.cols);
        const std::vector<std::uint32_t> assignment(assigned.assignment.begin() + first,
                                                    assigned.assignment.begin() + first + rows);
        const std::vector<double> distance(assigned.distance.begin() + first, assigned.distance.begin() + first + rows);
        out[r].means.assign(anchors.rows * anchors.cols, -1.0);
        cpu::robust_reduce(mine, first, assignment, distance, anchors, trim, rank, out[r].means, out[r].stats);
    });
    for (int r = 1; r < ranks; ++r) {
        CHECK(std::memcmp(out[r].means.data(), out[0].means.data(), out[0].means.size() * sizeof(double)) == 0);
        CHECK(out[r].stats.kept == out[0].stats.kept);
        CHECK(std::memcmp(out[r].stats.variance.data(), out[0].stats.variance.data(),
                          out[0].stats.variance.size() * sizeof(double)) == 0);
    }
    return out[0];
}

// Cuts of n rows into `ranks` ranges of random lengths, some of them empty.
std::vector<std::size_t> random_cut(std::size_t n, int ranks, std::mt19937_64& rng) {
    std::vector<std::size_t> cut{0, n};
    std::uniform_int_distribution<std::size_t> at(0, n);
    for (int r = 1; r < ranks; ++r) {
        cut.push_back(r == 2 ? cut[1] : at(rng));
    }
    std::sort(cut.begin(), cut.end());
    return cut;
}

}  // namespace

TEST_CASE("the trimmed reduce gives the same bits on 1, 2, 3, 4 and 8 ranks as in one process", "[cpu][ranks]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const auto type = GENERATE(StoredType::f32, StoredType::u8);
    const double trim = GENERATE(0.0, 0.1, 0.35);
    const std::size_t n = 5003, d = 13, m = 41;
    // Duplicated rows tie in distance: the ranks must break the ties by the row of the whole set.
    const Matrix floats = duplicated_points(n, d, rng);
    const StoredCase bytes = type == StoredType::u8 ? stored_mixture(StoredType::u8, n, d, rng) : StoredCase{};
    const Matrix& x = type == StoredType::u8 ? bytes.values : floats;
    const PointView points = type == StoredType::u8 ? bytes.stored.view() : PointView(floats);
    const Matrix anchors = anchors_near(x, m, rng);
    const ReferenceAssign assigned = reference_assign(x, anchors);
    INFO("type " << stored_type_name(type) << " trim " << trim);

    const Reduced one = reduce_split(points, assigned, anchors, trim, {0, n});
    const ReferenceReduce want = reference_reduce(x, assigned, m, trim);
    CHECK(one.stats.count == want.count);
    CHECK(one.stats.kept == want.kept);
    for (std::size_t j = 0; j < m; ++j) {
        for (std::size_t k = 0; k < d && !want.mean[j].empty(); ++k) {
            CHECK(close(one.means[j * d + k], want.mean[j][k], 1e-12, 1e-12));
        }
        CHECK(close(one.stats.variance[j], want.variance[j], 1e-9, 1e-9));
    }
    for (const int ranks : {2, 3, 4, 8}) {
        const std::vector<std::size_t> cut = random_cut(n, ranks, rng);
        INFO(ranks << " ranks");
        const Reduced split = reduce_split(points, assigned, anchors, trim, cut);
        CHECK(std::memcmp(split.means.data(), one.means.data(), one.means.size() * sizeof(double)) == 0);
        CHECK(split.stats.count == one.stats.count);
        CHECK(split.stats.kept == one.stats.kept);
        CHECK(std::memcmp(split.stats.variance.data(), one.stats.variance.data(),
                          one.stats.variance.size() * sizeof(double)) == 0);
    }
}

TEST_CASE("exact sums: a value's grid holds a sum of every member at the bound", "[cpu][ranks]") {
    for (const std::size_t count : {std::size_t{1}, std::size_t{2}, std::size_t{1000}, std::size_t{1} << 31}) {
        for (const double bound : {0.0, 1e-30, 0.75, 1.0, 3e18}) {
            const SumGrid grid = grid_for(2.0 * bound, count);
            const std::int64_t one = on_grid(bound, grid);
            INFO("count " << count << " bound " << bound);
            CHECK(one < (std::int64_t{1} << (61 - count_bits(count))));
            // count copies of the bound add without overflow, and come back within a step of each.
            const double total = static_cast<double>(one) * static_cast<double>(count);
            CHECK(total < 9.2e18);
            CHECK(std::abs(from_grid(one, grid) - bound) <= std::ldexp(1.0, grid.step_exponent));
        }
    }
    CHECK(count_bits(1) == 0);
    CHECK(count_bits(2) == 1);
    CHECK(count_bits(3) == 2);
    CHECK_THROWS(grid_for(std::numeric_limits<double>::infinity(), 4));
    CHECK_THROWS(grid_for(-1.0, 4));
}

TEST_CASE("a kept member's distance smaller than its row's, or infinite, is an error on every rank",
          "[cpu][ranks]") {
    std::mt19937_64 rng(seed());
    const Matrix x = duplicated_points(2000, 7, rng);
    // Anchors at the origin, and distances a millionth of the rows' own: the rows lie far past the
    // bound those distances give. Or one distance infinite, which no trim drops: no grid holds it,
    // and the error must come out of the parallel loop as an Error, not end the process.
    const bool infinite = GENERATE(false, true);
    INFO((infinite ? "an infinite distance" : "distances too small"));
    const double trim = infinite ? 0.0 : 0.1;
    const Matrix anchors(5, 7);
    ReferenceAssign assigned = reference_assign(x, anchors);
    for (double& distance : assigned.distance) {
        distance *= 1e-12;
    }
    if (infinite) {
        assigned = reference_assign(x, anchors);
        assigned.distance[1500] = std::numeric_limits<double>::infinity();
    }
    for (const int ranks : {1, 3}) {
        std::vector<int> threw(ranks, 0);
        ThreadRanks(ranks).run([&](Collective& rank) {
            const std::size_t first = rank.rank() * x.rows / ranks, last = (rank.rank() + 1) * x.rows / ranks;
            const PointView mine(StoredType::f32, x.row(first), last - first, x.cols);
            std::vector<double> means;
            AnchorStats stats;
            try {
                cpu::robust_reduce(mine, first,
                                   std::vector<std::uint32_t>(assigned.assignment.begin() + first,
                                                              assigned.assignment.begin() + last),
                                   std::vector<double>(assigned.distance.begin() + first, assigned.distance.begin() + last),
                                   anchors, trim, rank, means, stats);
            } catch (const Error& e) {
                threw[rank.rank()] = std::string(e.what()).find("farther from its anchor") != std::string::npos;
            }
        });
        CHECK(threw == std::vector<int>(ranks, 1));
    }
}
