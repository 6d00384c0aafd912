// A fit with its rows split between ranks run as threads (thread_ranks.hpp), each rank on a backend
// of its own made for its share of the rows (compared with one process's by check_same_fit).
#pragma once

#include "stored_points.hpp"
#include "support.hpp"
#include "thread_ranks.hpp"

#include "vlattice/anneal.hpp"
#include "vlattice/backend.hpp"
#include "vlattice/collective.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <vector>

namespace vlattice::test {

inline bool same_bits(const Floats& a, const Floats& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

using ShareBackend = std::function<std::unique_ptr<Backend>(const RowShare&)>;

// The fit on `ranks` ranks, each holding rank_rows' share on make(share); rank 0's result with
// every rank's assignments in row order. Every rank must end with the same anchors and energy.
inline FitResult split_fit(const PointView& points, const AnnealConfig& config, int ranks, const ShareBackend& make) {
    std::vector<FitResult> results(ranks);
    ThreadRanks(ranks).run([&](Collective& rank) {
        const RowRange mine = rank_rows(points.rows, ranks, rank.rank());
        const char* values = static_cast<const char*>(points.data()) + mine.first * points.pitch();
        const PointView share_of(points.type(), values, mine.count, points.cols);
        auto backend = make(RowShare{&rank, mine.first, points.rows});
        results[rank.rank()] = fit(share_of, config, *backend);
    });
    FitResult out = results[0];
    for (int r = 1; r < ranks; ++r) {
        CHECK(same_bits(results[r].anchors.data, out.anchors.data));
        CHECK(results[r].energy == out.energy);
        out.assignments.insert(out.assignments.end(), results[r].assignments.begin(), results[r].assignments.end());
    }
    return out;
}

// The sets of the split-fit tests: a mixture as float32 or uint8 rows, or 30 distinct float32 rows
// repeated (with 40 anchors, k-means++ must pick some twice, and maintenance must re-seed or merge
// them), and a fit with eager maintenance, so that splits gather members and merges happen, no
// fixed point that would quench the run before it, and a check every 2 assigns.
enum class SplitRows { floats, bytes, repeated };

struct SplitCase {
    Matrix floats;
    StoredCase stored;
    bool bytes = false;
    AnnealConfig config;
    const char* label = "";
    PointView points() const { return bytes ? stored.stored.view() : PointView(floats); }
};

inline SplitCase split_case(SplitRows kind, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    const std::size_t n = 9001, d = 11;
    SplitCase c;
    c.floats = duplicated_points(n, d, rng);
    if (kind == SplitRows::repeated) {
        for (std::size_t i = 30; i < n; ++i) {
            std::copy(c.floats.row(i % 30), c.floats.row(i % 30) + d, c.floats.row(i));
        }
    }
    c.bytes = kind == SplitRows::bytes;
    if (c.bytes) {
        c.stored = stored_mixture(StoredType::u8, n, d, rng);
    }
    c.config.anchors = 40;
    c.config.max_iters = 14;
    c.config.maintenance_every = 3;
    c.config.tolerance = 0.0;
    c.config.split_factor = 1.2;
    c.config.merge_factor = 0.9;
    c.config.validate_every = 2;
    c.config.min_gain = 0.0;
    c.config.init_sample = 4000;
    c.config.seed = seed;
    c.config.threads = 1;
    c.label = kind == SplitRows::bytes ? "uint8 rows" : kind == SplitRows::repeated ? "30 repeated float32 rows"
                                                                                     : "float32 rows";
    return c;
}

}  // namespace vlattice::test
