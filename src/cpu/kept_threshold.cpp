#include "cpu/kept_threshold.hpp"

#include <algorithm>
#include <cstring>

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

std::vector<MemberKey> kept_thresholds(LocalMembers& members, const std::vector<double>& distance,
                                       std::uint64_t first_row, const std::vector<std::uint64_t>& count,
                                       const std::vector<std::uint64_t>& keep, Collective& ranks) {
    const std::size_t m = count.size();
    std::vector<MemberKey> threshold(m, kKeepAll);
    std::vector<std::size_t> trimmed;
    for (std::size_t j = 0; j < m; ++j) {
        if (keep[j] < count[j]) {
            trimmed.push_back(j);
        }
    }
    const auto key_of = [&](std::uint32_t i) { return member_key(distance[i], first_row + i); };
    if (ranks.size() == 1) {
#pragma omp parallel for schedule(dynamic, 4)
        for (std::size_t s = 0; s < trimmed.size(); ++s) {
            const std::size_t j = trimmed[s];
            std::uint32_t* first = members.order.data() + members.offset[j];
            std::uint32_t* last = members.order.data() + members.offset[j + 1];
            std::uint32_t* nth = first + (keep[j] - 1);
            std::nth_element(first, nth, last, [&](std::uint32_t a, std::uint32_t b) { return key_of(a) < key_of(b); });
            threshold[j] = key_of(*nth);
        }
        return threshold;
    }
    // Digit by digit: the members whose key begins with the digits found so far are counted per
    // value of the next digit on every rank, the counts summed, and each anchor goes on in the bin
    // that holds its want-th smallest member.
    std::vector<MemberKey> prefix(trimmed.size());
    std::vector<std::uint64_t> want(trimmed.size());
    for (std::size_t s = 0; s < trimmed.size(); ++s) {
        want[s] = keep[trimmed[s]];
    }
    std::vector<std::uint64_t> bins(trimmed.size() * kBins);
    for (int p = 0; p < kDigits; ++p) {
        std::fill(bins.begin(), bins.end(), 0);
#pragma omp parallel for schedule(dynamic, 4)
        for (std::size_t s = 0; s < trimmed.size(); ++s) {
            const std::size_t j = trimmed[s];
            std::uint64_t* bin = bins.data() + s * kBins;
            for (std::size_t r = members.offset[j]; r < members.offset[j + 1]; ++r) {
                const MemberKey key = key_of(members.order[r]);
                if (matches(key, prefix[s], p)) {
                    ++bin[digit(key, p)];
                }
            }
        }
        ranks.sum(bins.data(), bins.size());
        for (std::size_t s = 0; s < trimmed.size(); ++s) {
            const std::uint64_t* bin = bins.data() + s * kBins;
            std::uint32_t b = 0;
            while (b + 1 < kBins && want[s] > bin[b]) {
                want[s] -= bin[b];
                ++b;
            }
            set_digit(prefix[s], p, b);
        }
    }
    for (std::size_t s = 0; s < trimmed.size(); ++s) {
        threshold[trimmed[s]] = prefix[s];
    }
    return threshold;
}

}  // namespace vlattice::cpu
