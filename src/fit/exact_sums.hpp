// Sums of an anchor's kept members whose bits depend neither on the order of the members nor on how
// the rows are split between threads, processes or GPUs. Every value is rounded once to a grid of
// the anchor's own, a power of two; the grid's integers then add exactly, so any order and any split
// of the additions give the same integer, and the mean is the same double everywhere.
//
// The grid comes from a bound on the kept members' values that costs no pass over their rows: a
// kept member x lies within sqrt(t) of the anchor c, t being the largest kept distance, so every
// coordinate |x_k| <= max_k |c_k| + sqrt(t). Twice that (`bound`, which covers the rounding of the
// distances and of the square root) is below 2^e; the grid's step is 2^(e - 1 - P), so that every
// value is at most 2^P steps. P = min(43, 61 - L) with 2^L >= the count of values:
// - up to kBatch of them add exactly in double (under 2^51, below the 2^53 that doubles hold
//   exactly), so the hot loop rounds and adds in vectors of doubles and moves each batch's sum into
//   64-bit integers once;
// - all of them add within 2^61 in those integers.
// A value is thus rounded to within 2^-(P + 1) of the bound: 2^-44 for up to 2^18 values, 2^-31 at
// 2^31, finer than float32 holds the mean (2^-24 of its magnitude) wherever the mean is not far
// below the bound.
//
// The CUDA backend's reduce (cuda/reduce/robust_reduce.cu) builds the same grids with the same
// functions and adds the same integers, so the two backends' means are the same doubles.
#pragma once

#include <math.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#ifdef __CUDACC__
#define VLATTICE_HOST_DEVICE __host__ __device__
#else
#define VLATTICE_HOST_DEVICE
#endif

namespace vlattice {

// Values added in double before their sum moves into integers.
constexpr std::size_t kBatch = 256;

// A value v stands for the integer rint(v * scale), scale = 2^-step_exponent.
struct SumGrid {
    int step_exponent = 0;
    double scale = 1.0;
    double limit = 0.0;  // 2^P: no value's integer is larger
};

// ceil(log2(count)) for count >= 1: the bits a sum of `count` terms adds to the largest one.
VLATTICE_HOST_DEVICE inline int count_bits(std::uint64_t count) {
    int bits = 0;
    while ((std::uint64_t{1} << bits) < count) {
        ++bits;
    }
    return bits;
}

// The grid for `count` values of magnitude at most bound / 2, bound finite and >= 0 (grid_for
// checks; ::frexp and ::ldexp, which the host's C library and CUDA's device library both give).
// Its scale is infinite or 0 where the bound leaves double's range.
VLATTICE_HOST_DEVICE inline SumGrid grid_of(double bound, std::uint64_t count) {
    int exponent = 0;
    ::frexp(bound, &exponent);  // bound < 2^exponent
    const int bits = count_bits(count > 0 ? count : 1);
    const int precision = 61 - bits < 43 ? 61 - bits : 43;
    SumGrid grid;
    grid.step_exponent = exponent - 1 - precision;
    grid.scale = ::ldexp(1.0, -grid.step_exponent);
    grid.limit = ::ldexp(1.0, precision);
    return grid;
}

VLATTICE_HOST_DEVICE inline bool grid_in_range(const SumGrid& grid) {
    return grid.scale != 0.0 && grid.scale - grid.scale == 0.0;  // neither 0 nor infinite (inf - inf is NaN)
}

inline SumGrid grid_for(double bound, std::uint64_t count) {
    if (!(bound >= 0.0) || !std::isfinite(bound)) {
        throw std::invalid_argument("grid_for: the bound on the values to sum is not finite and >= 0");
    }
    const SumGrid grid = grid_of(bound, count);
    if (!grid_in_range(grid)) {
        throw std::invalid_argument("grid_for: a bound of " + std::to_string(bound) + " leaves double's range");
    }
    return grid;
}

// The bound on an anchor's coordinates: `largest` is max_k |c_k|, `farthest` the largest kept
// squared distance (sqrt rounds correctly on both sides).
VLATTICE_HOST_DEVICE inline double coordinate_bound(double largest, double farthest) {
    return 2.0 * (largest + ::sqrt(farthest));
}

// The bound on an anchor's kept distances, each at most `farthest`.
VLATTICE_HOST_DEVICE inline double distance_bound(double farthest) { return 2.0 * farthest; }

// v's integer on the grid, as a double. The product is exact (a power of two, and the result
// neither overflows nor, where it is not rounded to 0 anyway, underflows); adding and taking away
// 1.5 * 2^52 rounds it to the nearest integer, ties to even, as every |x| < 2^51 does.
VLATTICE_HOST_DEVICE inline double on_grid(double value, const SumGrid& grid) {
    constexpr double kRound = 6755399441055744.0;
    return (value * grid.scale + kRound) - kRound;
}

VLATTICE_HOST_DEVICE inline double from_grid(std::int64_t sum, const SumGrid& grid) {
    return ::ldexp(static_cast<double>(sum), grid.step_exponent);
}

}  // namespace vlattice
