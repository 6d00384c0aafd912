// A whole fit on the CPU backend with its rows split between ranks is one process's fit, bit for
// bit: anchors, assignments, energies and every iteration's record, maintenance included.
#include "numeric.hpp"
#include "parallel/row_share.hpp"
#include "split_fit.hpp"
#include "stored_points.hpp"
#include "support.hpp"

#include "vlattice/anneal.hpp"
#include "vlattice/cpu_backend.hpp"

#include <catch2/catch.hpp>

#include <algorithm>

using namespace vlattice;
using namespace vlattice::test;

TEST_CASE("rank_rows splits the rows in whole blocks of the deterministic sums, in order", "[cpu][ranks]") {
    for (const std::uint64_t n : {std::uint64_t{1}, std::uint64_t{1023}, std::uint64_t{5000}, std::uint64_t{70001}}) {
        for (const int size : {1, 2, 3, 8}) {
            std::uint64_t next = 0;
            for (int r = 0; r < size; ++r) {
                const RowRange range = rank_rows(n, size, r);
                CHECK(range.first == next);
                CHECK((range.count == 0 || range.first % kSumBlock == 0));
                next = range.first + range.count;
            }
            CHECK(next == n);
        }
    }
}

TEST_CASE("gather_texts hands every rank's text, any length, to every rank in rank order", "[cpu][ranks]") {
    for (const int size : {1, 2, 3, 8}) {
        std::vector<std::vector<std::string>> got(size);
        ThreadRanks(size).run([&](Collective& rank) {
            // Lengths 0, 9, 18, ...: empty texts and texts that end inside a word.
            got[rank.rank()] = gather_texts(rank, std::string(9 * rank.rank(), static_cast<char>('a' + rank.rank())));
        });
        for (int r = 0; r < size; ++r) {
            REQUIRE(got[r].size() == static_cast<std::size_t>(size));
            for (int k = 0; k < size; ++k) {
                CHECK(got[r][k] == std::string(9 * k, static_cast<char>('a' + k)));
            }
        }
    }
}

TEST_CASE("a CPU fit on 2, 3, 4 and 8 ranks is the one-process fit, bit for bit", "[cpu][ranks][anneal]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    // A mixture as float32 or uint8 rows, or 30 distinct float32 rows repeated: with 40 anchors,
    // k-means++ must pick some twice, and maintenance must re-seed or merge them.
    enum class Rows { floats, bytes, repeated };
    const Rows kind = GENERATE(Rows::floats, Rows::bytes, Rows::repeated);
    const std::size_t n = 9001, d = 11;
    Matrix floats = duplicated_points(n, d, rng);
    if (kind == Rows::repeated) {
        for (std::size_t i = 30; i < n; ++i) {
            std::copy(floats.row(i % 30), floats.row(i % 30) + d, floats.row(i));
        }
    }
    const StoredCase stored = kind == Rows::bytes ? stored_mixture(StoredType::u8, n, d, rng) : StoredCase{};
    const PointView points = kind == Rows::bytes ? stored.stored.view() : PointView(floats);
    AnnealConfig config;
    config.anchors = 40;
    config.max_iters = 14;
    config.maintenance_every = 3;
    // Eager maintenance, so that splits gather members and merges happen, and no fixed point that
    // would quench the run before it; a check every 2 assigns.
    config.tolerance = 0.0;
    config.split_factor = 1.2;
    config.merge_factor = 0.9;
    config.validate_every = 2;
    config.min_gain = 0.0;
    config.init_sample = 4000;
    config.seed = run_seed;
    config.threads = 1;
    INFO((kind == Rows::bytes ? "uint8" : kind == Rows::repeated ? "30 repeated float32" : "float32") << " rows");
    auto one = make_cpu_backend(1);
    const FitResult want = fit(points, config, *one);
    for (const int ranks : {2, 3, 4, 8}) {
        INFO(ranks << " ranks");
        check_same_fit(split_fit(points, config, ranks,
                                 [](const RowShare& share) { return make_cpu_backend(1, share); }),
                       want);
    }
    if (kind == Rows::repeated) {
        CHECK(want.merged + want.split + want.reseeded + want.dropped_empty > 0);
    }
}
