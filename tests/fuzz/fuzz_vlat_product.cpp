// libFuzzer target for .vlat files, seeded with version 3 and 4 files (product codes, additive
// stages) and models as well as files of versions 1 and 2: the input is the file, its checksums
// recomputed first (vlat_checksums.hpp) so that the fuzzer reaches the checks behind them. Each
// input must load or fail with vlattice::Error. One that loads must decode to finite values, and the
// writer, which refuses only contents that would not read back, must write it and read it back the
// same: a reader that accepts what the writer refuses (or the other way round) is a finding.
#include "input_file.hpp"
#include "vlat_checksums.hpp"

#include "vlattice/codec.hpp"
#include "vlattice/format.hpp"
#include "vlattice/types.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {

using vlattice::Matrix;
using vlattice::VlatFile;

// With one anchor the assignments take no bits, so a file of a few bytes can stand for any n; what
// the reader does with a number of vectors beyond memory is not what this target is for.
constexpr std::uint64_t kMaxValues = std::uint64_t{1} << 22;

std::uint64_t header_field(const std::vector<std::uint8_t>& bytes, std::size_t at, std::size_t size) {
    std::uint64_t value = 0;
    for (std::size_t b = 0; b < size; ++b) {
        value |= static_cast<std::uint64_t>(bytes[at + b]) << (8 * b);
    }
    return value;
}

bool same_bits(const Matrix& a, const Matrix& b) {
    return a.rows == b.rows && a.cols == b.cols && a.data.size() == b.data.size() &&
           (a.data.empty() || std::memcmp(a.data.data(), b.data.data(), a.data.size() * sizeof(float)) == 0);
}

bool same_contents(const VlatFile& a, const VlatFile& b) {
    // A writer with no metadata writes {}.
    const bool same_metadata = a.metadata_json.empty() ? b.metadata_json == "{}" : a.metadata_json == b.metadata_json;
    return a.n == b.n && a.d == b.d && a.metric == b.metric && a.anchor_storage == b.anchor_storage &&
           a.codec == b.codec && same_bits(a.anchors, b.anchors) && a.assignments == b.assignments &&
           a.residuals.layout.bits == b.residuals.layout.bits && same_bits(a.residuals.offset, b.residuals.offset) &&
           same_bits(a.residuals.step, b.residuals.step) && a.residuals.codes == b.residuals.codes &&
           a.product.book.bits == b.product.book.bits && a.product.book.stages == b.product.book.stages &&
           a.product.book.bounds == b.product.book.bounds &&
           same_bits(a.product.book.rotation, b.product.book.rotation) &&
           same_bits(a.product.book.centroids, b.product.book.centroids) && a.product.codes == b.product.codes &&
           same_metadata;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::vector<std::uint8_t> bytes(data, data + size);
    vlattice::fuzz::fix_checksums(bytes);
    // docs/format.md: n is the u64 at 12, d the u32 at 20.
    if (bytes.size() >= 24 &&
        header_field(bytes, 12, 8) > kMaxValues / std::max<std::uint64_t>(1, header_field(bytes, 20, 4))) {
        return 0;
    }
    const vlattice::fuzz::InputFile input(bytes.data(), bytes.size(), ".vlat");
    VlatFile file;
    try {
        file = vlattice::read_vlat(input.path());
    } catch (const vlattice::Error&) {
        return 0;
    }
    // From here on an Error is a finding too: it escapes, and libFuzzer reports the abort.
    for (const float value : vlattice::reconstruct(file).data) {
        if (!std::isfinite(value)) {
            __builtin_trap();  // the reader let through a file that decodes to NaN or Inf
        }
    }
    const vlattice::fuzz::InputFile rewritten(nullptr, 0, ".rewritten.vlat");
    vlattice::write_vlat(rewritten.path(), file);
    if (!same_contents(file, vlattice::read_vlat(rewritten.path()))) {
        __builtin_trap();  // what the writer wrote reads back as something else
    }
    return 0;
}
