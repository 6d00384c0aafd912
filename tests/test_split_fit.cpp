// A whole fit on the CPU backend with its rows split between ranks is one process's fit, bit for
// bit: anchors, assignments, energies and every iteration's record, maintenance included.
#include "numeric.hpp"
#include "parallel/row_share.hpp"
#include "split_fit.hpp"
#include "support.hpp"

#include "vlattice/anneal.hpp"
#include "vlattice/cpu_backend.hpp"

#include <catch2/catch.hpp>


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

TEST_CASE("gather_to_first puts every rank's bytes on rank 0 in rank order, and refuses the wrong room",
          "[cpu][ranks]") {
    for (const int size : {1, 3}) {
        std::vector<std::uint32_t> all(static_cast<std::size_t>(size) * (size + 1) / 2, 0);
        ThreadRanks(size).run([&](Collective& rank) {
            // Rank r holds r + 1 values, each r.
            const std::vector<std::uint32_t> mine(rank.rank() + 1, static_cast<std::uint32_t>(rank.rank()));
            rank.gather_to_first(mine.data(), mine.size() * sizeof(std::uint32_t), rank.rank() == 0 ? all.data() : nullptr,
                                 rank.rank() == 0 ? all.size() * sizeof(std::uint32_t) : 0);
        });
        std::vector<std::uint32_t> want;
        for (int r = 0; r < size; ++r) {
            want.insert(want.end(), static_cast<std::size_t>(r) + 1, static_cast<std::uint32_t>(r));
        }
        CHECK(all == want);
    }
    std::uint32_t one = 7, room[2] = {0, 0};
    CHECK_THROWS_AS(single_process().gather_to_first(&one, sizeof one, room, sizeof room), Error);
}

TEST_CASE("a CPU fit on 2, 3, 4 and 8 ranks is the one-process fit, bit for bit", "[cpu][ranks][anneal]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    const SplitRows kind = GENERATE(SplitRows::floats, SplitRows::bytes, SplitRows::repeated);
    const SplitCase c = split_case(kind, run_seed);
    INFO(c.label);
    auto one = make_cpu_backend(1);
    const FitResult want = fit(c.points(), c.config, *one);
    for (const int ranks : {2, 3, 4, 8}) {
        INFO(ranks << " ranks");
        check_same_fit(split_fit(c.points(), c.config, ranks,
                                 [](const RowShare& share) { return make_cpu_backend(1, share); }),
                       want);
    }
    if (kind == SplitRows::repeated) {
        CHECK(want.merged + want.split + want.reseeded + want.dropped_empty > 0);
    }
}
