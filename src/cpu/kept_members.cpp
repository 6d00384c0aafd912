#include "cpu/kept_members.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

namespace vlattice::cpu {

namespace {

// The key's 96 bits (64 of distance, 32 of row: a run has fewer than 2^32 rows) in digits of 8,
// the most significant first.
constexpr int kDigitBits = 8;
constexpr int kBins = 1 << kDigitBits;
constexpr int kDigits = (64 + 32) / kDigitBits;

std::uint32_t digit(const MemberKey& key, int p) {
    return p < 8 ? static_cast<std::uint32_t>(key.distance_bits >> (56 - kDigitBits * p)) & (kBins - 1)
                 : static_cast<std::uint32_t>(key.row >> (24 - kDigitBits * (p - 8))) & (kBins - 1);
}

// Whether the first p digits of `key` are those of `prefix`.
bool matches(const MemberKey& key, const MemberKey& prefix, int p) {
    if (p == 0) {
        return true;
    }
    if (p <= 8) {
        return ((key.distance_bits ^ prefix.distance_bits) >> (64 - kDigitBits * p)) == 0;
    }
    return key.distance_bits == prefix.distance_bits &&
           ((key.row ^ prefix.row) >> (32 - kDigitBits * (p - 8))) == 0;
}

void set_digit(MemberKey& key, int p, std::uint32_t value) {
    if (p < 8) {
        key.distance_bits |= static_cast<std::uint64_t>(value) << (56 - kDigitBits * p);
    } else {
        key.row |= static_cast<std::uint64_t>(value) << (24 - kDigitBits * (p - 8));
    }
}

}  // namespace

MemberKey member_key(double distance, std::uint64_t row) {
    MemberKey key;
    std::memcpy(&key.distance_bits, &distance, sizeof distance);
    key.row = row;
    return key;
}

void select_kept(LocalMembers& members, const std::vector<double>& distance, std::uint64_t first_row,
                 const std::vector<std::uint64_t>& count, const std::vector<std::uint64_t>& keep, Collective& ranks) {
    const std::size_t m = count.size();
    members.kept.resize(m);
    std::vector<std::size_t> trimmed;
    for (std::size_t j = 0; j < m; ++j) {
        members.kept[j] = members.offset[j + 1] - members.offset[j];
        if (keep[j] < count[j]) {
            trimmed.push_back(j);
        }
    }
    const auto key_of = [&](std::uint32_t i) { return member_key(distance[i], first_row + i); };
    const auto range = [&](std::size_t j) {
        return std::pair{members.order.data() + members.offset[j], members.order.data() + members.offset[j + 1]};
    };
    if (ranks.size() == 1) {
#pragma omp parallel for schedule(dynamic, 4)
        for (std::size_t s = 0; s < trimmed.size(); ++s) {
            const std::size_t j = trimmed[s];
            const auto [first, last] = range(j);
            std::nth_element(first, first + keep[j] - 1, last,
                             [&](std::uint32_t a, std::uint32_t b) { return key_of(a) < key_of(b); });
            members.kept[j] = keep[j];
        }
        return;
    }
    // Digit by digit: the members whose key begins with the digits found so far are counted per
    // value of the next digit on every rank, the counts summed, and each anchor goes on in the bin
    // that holds its want-th smallest member. An anchor whose bin holds only members it keeps is
    // settled: its threshold is the largest key of that bin, and it leaves the exchanges (every rank
    // sees the same sums, so all agree on which anchors are still open).
    std::vector<MemberKey> prefix(trimmed.size());
    std::vector<std::uint64_t> want(trimmed.size());
    std::vector<std::size_t> open(trimmed.size());
    for (std::size_t s = 0; s < trimmed.size(); ++s) {
        want[s] = keep[trimmed[s]];
        open[s] = s;
    }
    std::vector<std::uint64_t> bins;
    for (int p = 0; p < kDigits && !open.empty(); ++p) {
        bins.assign(open.size() * kBins, 0);
#pragma omp parallel for schedule(dynamic, 4)
        for (std::size_t o = 0; o < open.size(); ++o) {
            const std::size_t s = open[o];
            std::uint64_t* bin = bins.data() + o * kBins;
            const auto [first, last] = range(trimmed[s]);
            for (const std::uint32_t* i = first; i != last; ++i) {
                const MemberKey key = key_of(*i);
                if (matches(key, prefix[s], p)) {
                    ++bin[digit(key, p)];
                }
            }
        }
        ranks.sum(bins.data(), bins.size());
        std::size_t still = 0;
        for (std::size_t o = 0; o < open.size(); ++o) {
            const std::size_t s = open[o];
            const std::uint64_t* bin = bins.data() + o * kBins;
            std::uint32_t b = 0;
            while (b + 1 < kBins && want[s] > bin[b]) {
                want[s] -= bin[b];
                ++b;
            }
            set_digit(prefix[s], p, b);
            if (want[s] == bin[b]) {
                for (int rest = p + 1; rest < kDigits; ++rest) {
                    set_digit(prefix[s], rest, kBins - 1);
                }
            } else {
                open[still++] = s;
            }
        }
        open.resize(still);
    }
    // The threshold found, each rank keeps its members at or below it.
#pragma omp parallel for schedule(dynamic, 4)
    for (std::size_t s = 0; s < trimmed.size(); ++s) {
        const auto [first, last] = range(trimmed[s]);
        const std::uint32_t* middle =
            std::partition(first, last, [&](std::uint32_t i) { return key_of(i) <= prefix[s]; });
        members.kept[trimmed[s]] = static_cast<std::size_t>(middle - first);
    }
}

}  // namespace vlattice::cpu
