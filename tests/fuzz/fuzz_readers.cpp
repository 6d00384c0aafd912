// libFuzzer target for every reader of untrusted vector and .vlat bytes: the first byte picks the
// format (its index in kExtensions), the rest is the file. Each input must either load or fail
// with vlattice::Error; a crash, a sanitizer report, a hang or any other exception is a bug. .vlat
// inputs get their checksums recomputed first, so that the fuzzer reaches the checks behind them,
// and every .vlat that loads must decode to finite values.
#include "input_file.hpp"

#include "vlattice/codec.hpp"
#include "vlattice/format.hpp"
#include "vlattice/io.hpp"
#include "vlattice/types.hpp"

#include <xxhash.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

namespace {

constexpr std::array<const char*, 7> kExtensions = {".vlat", ".npy", ".fvecs", ".bvecs", ".ivecs", ".fbin", ".u8bin"};

// docs/format.md: the header's checksum of bytes [0, 36) at 36; then sections of a 4-byte tag, a
// u64 payload length, the payload and the payload's checksum.
void fix_checksums(std::vector<std::uint8_t>& bytes) {
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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) {
        return 0;
    }
    const std::size_t format = data[0] % kExtensions.size();
    std::vector<std::uint8_t> bytes(data + 1, data + size);
    if (format == 0) {
        fix_checksums(bytes);
    }
    const vlattice::fuzz::InputFile input(bytes.data(), bytes.size(), kExtensions[format]);
    try {
        if (format == 0) {
            const vlattice::Matrix rows = vlattice::reconstruct(vlattice::read_vlat(input.path()));
            for (const float value : rows.data) {
                if (!std::isfinite(value)) {
                    __builtin_trap();  // the reader let through a file that decodes to NaN or Inf
                }
            }
        } else {
            vlattice::read_vectors(input.path());
        }
    } catch (const vlattice::Error&) {
    }
    return 0;
}
