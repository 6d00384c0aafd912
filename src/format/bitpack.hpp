// Size arithmetic shared by the bit packer and the .vlat reader, which must agree on it exactly.
#pragma once

#include <cstdint>
#include <optional>

namespace vlattice {

// Bytes that `count` values of `bits` bits occupy once packed: ceil(count * bits / 8). Empty when
// that does not fit in 64 bits, which only a corrupt header can ask for.
std::optional<std::uint64_t> packed_byte_count(std::uint64_t count, unsigned bits);

}  // namespace vlattice
