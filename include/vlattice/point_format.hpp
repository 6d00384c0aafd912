// How a fit holds its points (--storage) and how exactly it assigns them (--assign-precision).
#pragma once

#include "vlattice/point_set.hpp"
#include "vlattice/types.hpp"

#include <cstdint>
#include <string>

namespace vlattice {

// The precision the points are held in during a fit. f16 and bf16 halve the GPU's memory for the
// points and the bytes of every pass over them. Both backends round the points the same way before
// the fit, so a CPU and a GPU fit of one input see the same points; the energy is that of the
// rounded points. The rounding scales by a power of two first (exactly), so that float16's range
// fits the data whatever its units.
enum class PointStorage : std::uint8_t { f32, f16, bf16 };

// exact: every point gets the anchor that its distances computed in double would give it, ties to
// the lowest anchor, on any backend. fast: the fast distances decide alone (on the GPU one
// half-precision tensor-core product, as coarse as tf32; on the CPU the float32 GEMM), so a point
// nearly equidistant from two anchors may take the farther one.
enum class AssignPrecision : std::uint8_t { exact, fast };

struct PointFormat {
    PointStorage storage = PointStorage::f32;
    // Stored values are 2^exponent times the coordinates; chosen so that the largest |coordinate|
    // lands in [2^14, 2^15), below float16's largest value with room for anchors up to twice that.
    // The GPU's half-precision operands use it under every storage.
    int exponent = 0;
};

// The largest |coordinate|; NaN or infinity where the points hold one.
float largest_magnitude(const PointView& points);

// The format of `storage` for these points (their largest |coordinate| sets the exponent).
PointFormat point_format(const PointView& points, PointStorage storage);
// The same from their largest |coordinate|, as check_accepted_range returns it (a pass less).
PointFormat point_format(float largest, PointStorage storage);

// The magnitudes a fit accepts in d dimensions. Every coordinate must be finite with |x| <= largest,
// so that the squared distance from any point to an anchor, at most (2 largest)^2 d, stays within
// half of float32's range: the CPU's float32 GEMM and the GPU's unscaled 16-bit products compute
// distances as ||x||^2 + ||c||^2 - 2 x.c, whose terms would otherwise overflow and collapse the fit
// (energies are summed in double, which float32 distances cannot overflow). The largest |coordinate|
// must be 0 or at least smallest_scale: smaller data would leave the scaling exponent's range, and
// the 16-bit operands would round it to zero.
struct AcceptedRange {
    double largest = 0.0;  // sqrt(FLT_MAX / (8 d)) rounded down to 3 significant digits, as printed
    double smallest_scale = 0.0;
};
AcceptedRange accepted_range(std::size_t d);

// Throws Error naming `source`, the row and the column of the first coordinate beyond
// accepted_range (or that is not finite), or of the largest one when the data's scale is below it.
// Returns the largest |coordinate| (0 for no points). Rows are named from `first_row` on, for a
// part of a file.
float check_accepted_range(const PointView& points, const std::string& source, std::size_t first_row = 0);

// Rounds every coordinate to the nearest value the format holds (ties to even), in place:
// x <- 2^-e half(2^e x). f32 leaves the points as they are.
void round_to_format(Matrix& points, const PointFormat& format);

// Whether round_to_format would leave every coordinate as it is, bit for bit: always under f32, and
// under f16 for data float16 holds (float16 or 8-bit inputs, pixels). A fit then uses the points as
// given instead of a rounded copy of them. 8-bit points are known exact under both 16-bit formats,
// and float16 points under f16 when the format scales them up, without a pass over them.
bool holds_exactly(const PointView& points, const PointFormat& format);

const char* storage_name(PointStorage storage);
// Throws Error naming the bad value.
PointStorage parse_storage(const std::string& name);

const char* precision_name(AssignPrecision precision);
// Throws Error naming the bad value.
AssignPrecision parse_precision(const std::string& name);

}  // namespace vlattice
