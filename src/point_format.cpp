#include "vlattice/point_format.hpp"

#include "vlattice/half.hpp"

#include "numeric.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

namespace vlattice {

namespace {

// Exponents beyond this would take 2^(1 - 2e), the GPU's unscaling of a dot product, out of float's range.
// Accepted data never reaches it (accepted_range): the smallest scale is 2^(14 - kMaxExponent), and
// the largest |value|, sqrt(FLT_MAX / 8) < 2^63 at d = 1, gives an exponent of at least 14 - 62.
constexpr int kMaxExponent = 60;
static_assert(14 - 62 > -kMaxExponent, "the largest accepted magnitude must not reach the exponent's clamp");

// float32 -> bfloat16 -> float32, to nearest with ties to even, for finite values.
float round_to_bf16(float value) {
    std::uint32_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    bits += 0x7fffu + ((bits >> 16) & 1u);
    bits &= 0xffff0000u;
    float rounded;
    std::memcpy(&rounded, &bits, sizeof rounded);
    return rounded;
}

// `value` scaled up, rounded to float16 or bfloat16 and scaled back: what the format holds of it.
inline float rounded(float value, bool f16, float up, float down) {
    const float scaled = value * up;
    return (f16 ? half_to_float(float_to_half(scaled)) : round_to_bf16(scaled)) * down;
}

// Each value scaled up, rounded to float16 or bfloat16 and scaled back. In the x86-64-v3 copy, F16C's
// hardware conversion rounds to nearest even as libgcc's software one does, bit for bit, and a
// 10,000 x 128 set takes 0.7 ms on one core instead of 17.
VLATTICE_ALSO_FOR_X86_64_V3
void round_values(float* values, std::size_t count, bool f16, float up, float down) {
#pragma omp parallel for schedule(static) if (count >= kParallelValues)
    for (std::size_t i = 0; i < count; ++i) {
        values[i] = rounded(values[i], f16, up, down);
    }
}

// Whether round_values would change any value, without writing: the same rounding, compared bit for
// bit with each value.
VLATTICE_ALSO_FOR_X86_64_V3
bool rounding_changes(const float* values, std::size_t count, bool f16, float up, float down) {
    std::uint32_t changed = 0;
#pragma omp parallel for schedule(static) reduction(| : changed) if (count >= kParallelValues)
    for (std::size_t i = 0; i < count; ++i) {
        const float value = rounded(values[i], f16, up, down);
        std::uint32_t before;
        std::uint32_t after;
        std::memcpy(&before, &values[i], sizeof before);
        std::memcpy(&after, &value, sizeof after);
        changed |= static_cast<std::uint32_t>(before != after);
    }
    return changed != 0;
}

// The largest |value|'s bit pattern. With the sign cleared, the patterns of finite values and
// infinity are ordered as their magnitudes and every NaN's lies above them; integer maxima vectorise
// where float ones (which must skip NaNs) did not: a 10,000 x 128 scan took 2.5 ms on the GPU
// machine's CPU.
VLATTICE_ALSO_FOR_X86_64_V3
std::uint32_t largest_magnitude_bits(const float* values, std::size_t count) {
    std::uint32_t largest = 0;
#pragma omp parallel for schedule(static) reduction(max : largest) if (count >= kParallelValues)
    for (std::size_t i = 0; i < count; ++i) {
        std::uint32_t bits;
        std::memcpy(&bits, &values[i], sizeof bits);
        largest = std::max(largest, bits & 0x7fffffffu);
    }
    return largest;
}

// Down to `digits` significant digits, so that a limit printed with %.{digits}g is the one applied.
double round_down(double value, int digits) {
    const double unit = std::pow(10.0, std::floor(std::log10(value)) - (digits - 1));
    return std::floor(value / unit) * unit;
}

std::string printed(double value) {
    char text[32];
    std::snprintf(text, sizeof text, "%.3g", value);
    return text;
}

std::string position(std::size_t index, std::size_t d, std::size_t first_row) {
    return "row " + std::to_string(first_row + index / d) + " (0-based), column " + std::to_string(index % d) +
           " (0-based)";
}

}  // namespace

AcceptedRange accepted_range(std::size_t d) {
    AcceptedRange range;
    range.largest = round_down(std::sqrt(static_cast<double>(FLT_MAX) / (8.0 * static_cast<double>(d))), 3);
    range.smallest_scale = std::ldexp(1.0, 14 - kMaxExponent);
    return range;
}

namespace {

// Values widened at a time where the points are not float32: as many as the scans below take on
// every thread.
constexpr std::size_t kBlockValues = kParallelValues;

// visit(values, count, first_row) over the points' rows as float32, whole rows a block at a time, in
// order; stops at the first visit that returns true, and returns whether one did.
template <class Visit>
bool any_block(const PointView& points, Visit visit) {
    if (points.rows == 0 || points.cols == 0) {
        return false;
    }
    const std::size_t block_rows = std::max<std::size_t>(1, kBlockValues / points.cols);
    std::vector<float> scratch;
    for (std::size_t first = 0; first < points.rows; first += block_rows) {
        const std::size_t count = std::min(block_rows, points.rows - first);
        if (visit(points.block(first, count, scratch), count * points.cols, first)) {
            return true;
        }
    }
    return false;
}

float from_bits(std::uint32_t bits) {
    float value;
    std::memcpy(&value, &bits, sizeof value);
    return value;
}

}  // namespace

float largest_magnitude(const PointView& points) {
    std::uint32_t largest = 0;
    any_block(points, [&](const float* values, std::size_t count, std::size_t) {
        largest = std::max(largest, largest_magnitude_bits(values, count));
        return false;
    });
    return from_bits(largest);
}

float check_accepted_range(const PointView& points, const std::string& source, std::size_t first_row) {
    const std::size_t d = points.cols;
    if (points.rows == 0 || d == 0) {
        return 0.0f;
    }
    const AcceptedRange range = accepted_range(d);
    std::uint32_t largest_bits = 0;
    any_block(points, [&](const float* values, std::size_t count, std::size_t first) {
        const float largest = from_bits(largest_magnitude_bits(values, count));
        if (!(largest <= range.largest)) {
            const float* beyond =
                std::find_if(values, values + count, [&](float v) { return !(std::abs(v) <= range.largest); });
            const std::string where =
                source + ": " + position(static_cast<std::size_t>(beyond - values), d, first_row + first);
            if (!std::isfinite(*beyond)) {
                throw Error(where + " is " + printed(*beyond) + "; vectors must be finite");
            }
            throw Error(where + " is " + printed(*beyond) + ", beyond " + printed(range.largest) +
                        ", the largest |value| vlattice fits in " + std::to_string(d) +
                        " dimensions (a squared distance to an anchor, up to (2 x " + printed(range.largest) +
                        ")^2 x " + std::to_string(d) + ", must stay within half of float32's range): scale the data down");
        }
        largest_bits = std::max(largest_bits, largest_magnitude_bits(values, count));
        return false;
    });
    const float largest = from_bits(largest_bits);
    if (largest > 0.0f && largest < range.smallest_scale) {
        any_block(points, [&](const float* values, std::size_t count, std::size_t first) {
            const float* at = std::find_if(values, values + count, [&](float v) { return std::abs(v) == largest; });
            if (at == values + count) {
                return false;
            }
            throw Error(source + ": the largest |value|, " + printed(*at) + " at " +
                        position(static_cast<std::size_t>(at - values), d, first_row + first) + ", is below " +
                        printed(range.smallest_scale) + " (2^" + std::to_string(14 - kMaxExponent) +
                        "), the smallest scale vlattice fits: its 16-bit operands would round such data to zero; "
                        "scale the data up");
        });
    }
    return largest;
}

PointFormat point_format(const PointView& points, PointStorage storage) {
    return point_format(largest_magnitude(points), storage);
}

PointFormat point_format(float largest, PointStorage storage) {
    PointFormat format;
    format.storage = storage;
    // A NaN anywhere comes out as the largest pattern, and leaves the default exponent as infinity does.
    if (largest > 0.0f && std::isfinite(largest)) {
        format.exponent = std::clamp(14 - std::ilogb(largest), -kMaxExponent, kMaxExponent);
    }
    return format;
}

void round_to_format(Matrix& points, const PointFormat& format) {
    if (format.storage == PointStorage::f32) {
        return;
    }
    // Powers of two within float's range (|exponent| <= kMaxExponent), so that multiplying by them
    // rounds exactly as ldexp does, at a fraction of its cost.
    round_values(points.data.data(), points.data.size(), format.storage == PointStorage::f16,
                 std::ldexp(1.0f, format.exponent), std::ldexp(1.0f, -format.exponent));
}

bool holds_exactly(const PointView& points, const PointFormat& format) {
    if (format.storage == PointStorage::f32) {
        return true;
    }
    // Up to 255 in magnitude, scaled by a power of two below float16's largest value: eight
    // significant bits, which float16 and bfloat16 both hold. A float16 value scaled up by a power
    // of two stays a float16 value, as long as it stays below 2^15, which the exponent ensures.
    const bool eight_bit = points.type() == StoredType::u8 || points.type() == StoredType::i8;
    if (eight_bit || (points.type() == StoredType::f16 && format.storage == PointStorage::f16 && format.exponent >= 0)) {
        return true;
    }
    const float up = std::ldexp(1.0f, format.exponent);
    const float down = std::ldexp(1.0f, -format.exponent);
    return !any_block(points, [&](const float* values, std::size_t count, std::size_t) {
        return rounding_changes(values, count, format.storage == PointStorage::f16, up, down);
    });
}

const char* storage_name(PointStorage storage) {
    switch (storage) {
    case PointStorage::f16:
        return "f16";
    case PointStorage::bf16:
        return "bf16";
    case PointStorage::f32:
        break;
    }
    return "f32";
}

PointStorage parse_storage(const std::string& name) {
    for (PointStorage s : {PointStorage::f32, PointStorage::f16, PointStorage::bf16}) {
        if (name == storage_name(s)) {
            return s;
        }
    }
    throw Error("--storage: expected f32, f16 or bf16, got '" + name + "'");
}

const char* precision_name(AssignPrecision precision) {
    return precision == AssignPrecision::fast ? "fast" : "exact";
}

AssignPrecision parse_precision(const std::string& name) {
    for (AssignPrecision p : {AssignPrecision::exact, AssignPrecision::fast}) {
        if (name == precision_name(p)) {
            return p;
        }
    }
    throw Error("--assign-precision: expected exact or fast, got '" + name + "'");
}

}  // namespace vlattice
