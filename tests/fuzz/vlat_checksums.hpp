// Recomputing a fuzzed .vlat's checksums, so that the fuzzer reaches the checks behind them rather
// than stopping at a checksum mismatch on almost every input.
#pragma once

#include <xxhash.h>

#include <cstdint>
#include <vector>

namespace vlattice::fuzz {

// docs/format.md: the header's checksum of bytes [0, 36) at 36; then sections of a 4-byte tag, a
// u64 payload length, the payload and the payload's checksum.
inline void fix_checksums(std::vector<std::uint8_t>& bytes) {
    const auto store = [&](std::size_t at, std::uint64_t value) {
        for (int b = 0; b < 8; ++b) {
            bytes[at + b] = static_cast<std::uint8_t>(value >> (8 * b));
        }
    };
    if (bytes.size() < 44) {
        return;
    }
    store(36, XXH3_64bits(bytes.data(), 36));
    std::size_t at = 44;
    while (at + 12 <= bytes.size()) {
        std::uint64_t length = 0;
        for (int b = 0; b < 8; ++b) {
            length |= static_cast<std::uint64_t>(bytes[at + 4 + b]) << (8 * b);
        }
        if (length > bytes.size() || at + 12 + length + 8 > bytes.size()) {
            return;
        }
        store(at + 12 + length, XXH3_64bits(bytes.data() + at + 12, length));
        at += 12 + length + 8;
    }
}

}  // namespace vlattice::fuzz
