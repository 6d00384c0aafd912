// Assignment packing for the .vlat ASGN section. n can be 10^8, where a per-bit loop would dominate
// reading and writing a file, so packing moves 32-bit words through a 64-bit accumulator and
// unpacking reads each value with one 64-bit load.
#include "format/bitpack.hpp"

#include "format/little_endian.hpp"
#include "vlattice/format.hpp"
#include "vlattice/types.hpp"

namespace vlattice {

namespace {

constexpr unsigned kMaxBits = 32;

void check_bits(const char* caller, unsigned bits) {
    if (bits > kMaxBits) {
        throw Error(std::string(caller) + ": " + std::to_string(bits) + " bits per value is outside 0..32");
    }
}

std::uint64_t value_mask(unsigned bits) {
    return (std::uint64_t{1} << bits) - 1;
}

std::size_t packed_size(const char* caller, std::size_t count, unsigned bits) {
    const std::optional<std::uint64_t> bytes = packed_byte_count(count, bits);
    if (!bytes) {
        throw Error(std::string(caller) + ": " + std::to_string(count) + " values of " + std::to_string(bits) +
                    " bits do not fit in 64-bit sizes");
    }
    return static_cast<std::size_t>(*bytes);
}

// The bytes from `at` to `end` (fewer than 8), zero-extended: the last values' 8-byte window would
// run off the end of the stream.
std::uint64_t tail_window(const std::uint8_t* at, const std::uint8_t* end) {
    std::uint64_t window = 0;
    for (unsigned shift = 0; at < end; shift += 8) {
        window |= static_cast<std::uint64_t>(*at++) << shift;
    }
    return window;
}

}  // namespace

std::optional<std::uint64_t> packed_byte_count(std::uint64_t count, unsigned bits) {
    std::uint64_t total_bits = 0;
    if (__builtin_mul_overflow(count, std::uint64_t{bits}, &total_bits)) {
        return std::nullopt;
    }
    return total_bits / 8 + (total_bits % 8 != 0);
}

unsigned assignment_bits(std::uint64_t m) {
    if (m <= 1) {
        return 0;
    }
    return 64 - static_cast<unsigned>(__builtin_clzll(m - 1));
}

std::vector<std::uint8_t> pack_bits(const std::vector<std::uint32_t>& values, unsigned bits) {
    check_bits("pack_bits", bits);
    // Only whole words are stored inside the loop, and 4 * floor(total / 32) <= ceil(total / 8), so
    // the exact-size buffer never overflows.
    std::vector<std::uint8_t> out(packed_size("pack_bits", values.size(), bits));
    if (bits == 0) {
        return out;
    }
    const std::uint64_t mask = value_mask(bits);
    std::uint64_t pending = 0;
    unsigned pending_bits = 0;  // < 32 between values, so adding up to 32 more never overflows 64
    std::uint8_t* next = out.data();
    for (const std::uint32_t value : values) {
        pending |= (value & mask) << pending_bits;
        pending_bits += bits;
        if (pending_bits >= 32) {
            le::store(next, static_cast<std::uint32_t>(pending));
            next += 4;
            pending >>= 32;
            pending_bits -= 32;
        }
    }
    for (; pending_bits > 0; pending_bits = pending_bits > 8 ? pending_bits - 8 : 0) {
        *next++ = static_cast<std::uint8_t>(pending);
        pending >>= 8;
    }
    return out;
}

std::vector<std::uint32_t> unpack_bits(const std::vector<std::uint8_t>& bytes, unsigned bits, std::size_t count) {
    check_bits("unpack_bits", bits);
    const std::size_t needed = packed_size("unpack_bits", count, bits);
    if (bytes.size() < needed) {
        throw Error("unpack_bits: " + std::to_string(count) + " values of " + std::to_string(bits) + " bits need " +
                    std::to_string(needed) + " bytes, got " + std::to_string(bytes.size()));
    }
    std::vector<std::uint32_t> values(count);
    if (bits == 0) {
        return values;
    }
    // Value i starts at bit i * bits; with bits <= 32 it lies within the 8 bytes from byte
    // i * bits / 8, so each value is one load and one shift, with no dependency between values.
    const std::uint64_t mask = value_mask(bits);
    const std::uint8_t* const data = bytes.data();
    const std::uint8_t* const end = data + needed;
    std::uint64_t position = 0;
    std::size_t i = 0;
    for (; i < count && (position >> 3) + 8 <= needed; ++i, position += bits) {
        const std::uint64_t window = le::load<std::uint64_t>(data + (position >> 3));
        values[i] = static_cast<std::uint32_t>((window >> (position & 7)) & mask);
    }
    for (; i < count; ++i, position += bits) {
        const std::uint64_t window = tail_window(data + (position >> 3), end);
        values[i] = static_cast<std::uint32_t>((window >> (position & 7)) & mask);
    }
    return values;
}

}  // namespace vlattice
