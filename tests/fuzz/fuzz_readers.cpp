// libFuzzer target for every reader of untrusted vector and .vlat bytes: the first byte picks the
// format (its index in kExtensions), the rest is the file. Each input must either load or fail
// with vlattice::Error; a crash, a sanitizer report, a hang or any other exception is a bug. .vlat
// inputs get their checksums recomputed first, so that the fuzzer reaches the checks behind them,
// and every .vlat that loads must decode to finite values.
#include "input_file.hpp"
#include "vlat_checksums.hpp"

#include "vlattice/codec.hpp"
#include "vlattice/format.hpp"
#include "vlattice/io.hpp"
#include "vlattice/types.hpp"

#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

namespace {

constexpr std::array<const char*, 7> kExtensions = {".vlat", ".npy", ".fvecs", ".bvecs", ".ivecs", ".fbin", ".u8bin"};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) {
        return 0;
    }
    const std::size_t format = data[0] % kExtensions.size();
    std::vector<std::uint8_t> bytes(data + 1, data + size);
    if (format == 0) {
        vlattice::fuzz::fix_checksums(bytes);
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
