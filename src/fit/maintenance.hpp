// Merge, split and re-seed: the anchor housekeeping the driver runs every P iterations on the
// backend's per-anchor statistics (m-sized data only), fetching only the anchor rows it merges.
#pragma once

#include "vlattice/backend.hpp"
#include "vlattice/config.hpp"
#include "vlattice/two_means.hpp"
#include "vlattice/types.hpp"

#include <cstdint>
#include <functional>
#include <vector>

namespace vlattice {

struct MaintenanceResult {
    std::vector<std::uint32_t> changed_rows;  // anchors rewritten, ascending
    Matrix changed;                           // their new rows: row r is anchor changed_rows[r]
    int merged = 0;
    int split = 0;
    int reseeded = 0;
};

// The listed rows of the current anchors, in list order (Backend::download_anchor_rows).
using RowSource = std::function<Matrix(const std::vector<std::uint32_t>& rows)>;

// The 2-means split of each listed anchor, on up to a few hundred of its members, in list order
// (Backend::split_members).
using SplitSource = std::function<std::vector<MemberSplit>(const std::vector<std::uint32_t>& anchors)>;

// Each listed anchor's nearest other listed anchor, exact, the indices positions in the list
// (Backend::nearest_anchors).
using NearestSource = std::function<NearestRows(const std::vector<std::uint32_t>& live)>;

// The changes to the m anchors of d values (m = stats.count.size()), which stay where they are:
// maintenance reads only the rows it merges. The number of anchors never changes here:
//  1. merge: an anchor closer to its nearest neighbour than merge_factor times the count-weighted
//     mean nearest-anchor spacing merges into it (count-weighted mean), freeing its slot;
//  2. split: anchors whose count or variance exceeds split_factor times the mean are split by
//     2-means on their members, into a free slot (empty or merged away) or, when none is left, into
//     the slot of the anchor whose removal costs least, if that costs less than the split gains;
//  3. re-seed: slots still free are filled by splitting the anchors of largest squared error.
// Anchors whose members are all identical cannot be split; their free slots stay empty.
MaintenanceResult maintain(const AnchorStats& stats, std::size_t d, const AnnealConfig& config, const RowSource& rows,
                           const SplitSource& splits, const NearestSource& nearest);

}  // namespace vlattice
