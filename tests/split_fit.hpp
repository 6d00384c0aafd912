// A fit with its rows split between ranks run as threads (thread_ranks.hpp), each rank on a backend
// of its own made for its share of the rows (compared with one process's by check_same_fit).
#pragma once

#include "thread_ranks.hpp"

#include "vlattice/anneal.hpp"
#include "vlattice/backend.hpp"
#include "vlattice/collective.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <functional>
#include <memory>
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

}  // namespace vlattice::test
