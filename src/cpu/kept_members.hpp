// Which members a trimmed reduce keeps, over every rank's rows. An anchor keeps its `keep` members
// smallest by (distance, row of the whole set), so the kept set is one set whatever the split: its
// largest key, the threshold, is found over the ranks, and a member is kept where its key is at
// most that.
#pragma once

#include "vlattice/collective.hpp"

#include <cstdint>
#include <vector>

namespace vlattice::cpu {

// A member's place in the trim's order: distances are >= 0, and the bits of non-negative doubles
// order like the doubles.
struct MemberKey {
    std::uint64_t distance_bits = 0;
    std::uint64_t row = 0;
};

inline bool operator<(const MemberKey& a, const MemberKey& b) {
    return a.distance_bits < b.distance_bits || (a.distance_bits == b.distance_bits && a.row < b.row);
}
inline bool operator<=(const MemberKey& a, const MemberKey& b) { return !(b < a); }

MemberKey member_key(double distance, std::uint64_t row);

// This rank's members of each anchor: rows (of this rank) order[offset[j] .. offset[j + 1]), of
// which the first kept[j] are kept once select_kept has run.
struct LocalMembers {
    std::vector<std::size_t> offset;
    std::vector<std::uint32_t> order;
    std::vector<std::size_t> kept;
};

// Puts first, in each anchor's range, this rank's members among the anchor's keep[j] smallest of
// all ranks (all of them where keep[j] is its whole count[j], summed over the ranks), and sets
// members.kept. One rank selects in place; several find each threshold digit by digit, on
// histograms summed over the ranks, then keep what lies at or below it.
void select_kept(LocalMembers& members, const std::vector<double>& distance, std::uint64_t first_row,
                 const std::vector<std::uint64_t>& count, const std::vector<std::uint64_t>& keep, Collective& ranks);

}  // namespace vlattice::cpu
