// Spending a byte budget per vector: how many anchors the packed ids can afford, and which residual
// width each dimension gets so that the reconstruction error is smallest for the bits left over.
#pragma once

#include "vlattice/types.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace vlattice {

// Bytes per vector the packed assignments of n vectors to m anchors take: ceil(n * ceil(log2 m) / 8) / n.
double assignment_bytes_per_vector(std::size_t n, std::size_t m);

// The largest anchor count <= wanted (and <= n) whose packed assignments fit in budget_bytes per
// vector. Throws Error when budget_bytes is negative or not finite.
std::size_t anchors_within(double budget_bytes, std::size_t n, std::size_t wanted);

// Whole residual bytes per vector left once the assignments of n vectors to m anchors are paid for,
// capped at what 8 bits in every one of d dimensions takes, however large the budget. Throws Error
// when budget_bytes is negative or not finite.
std::size_t residual_bytes_within(double budget_bytes, std::size_t n, std::size_t m, std::size_t d);

// One width per dimension from kResidualWidths, spending at most bits_per_vector bits: starting from
// 0 everywhere, it repeatedly widens the dimension whose next width removes the most squared error
// per bit, the errors being those of the actual quantiser (residual.hpp) on these points. Ties go to
// the lower dimension; a step that removes no error is never bought. The result is the same for any
// thread count.
std::vector<std::uint8_t> allocate_widths(const Matrix& points, const Matrix& anchors,
                                          const std::vector<std::uint32_t>& assignments, std::size_t bits_per_vector);

// "776 x 4 bits, 8 x 0 bits": the widths in use, widest first.
std::string describe_widths(const std::vector<std::uint8_t>& bits);

}  // namespace vlattice
