// The .vlat layout from docs/format.md, restated for the tests so that they check the layout rather
// than echo the code, and ways to change a file's bytes while keeping its checksums right, so that
// a reader gets past them to the check a test is about.
#pragma once

#include "support.hpp"

#include "vlattice/format.hpp"

#include <xxhash.h>

#include <cstdint>
#include <cstring>
#include <string>

namespace vlattice::test {

constexpr std::size_t kHeaderBytes = 44;
constexpr std::size_t kHeaderChecksumOffset = 36;
constexpr std::size_t kVersionOffset = 8;
constexpr std::size_t kNOffset = 12;
constexpr std::size_t kDOffset = 20;
constexpr std::size_t kMOffset = 24;
constexpr std::size_t kMetricOffset = 28;
constexpr std::size_t kStorageOffset = 29;
constexpr std::size_t kCodecOffset = 30;
constexpr std::size_t kBitsOffset = 31;
constexpr std::size_t kSectionCountOffset = 32;
constexpr std::size_t kSectionHeadBytes = 12;

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the tests build expected bytes with memcpy");

template <typename T>
std::string bytes_of(T value) {
    std::string bytes(sizeof value, '\0');
    std::memcpy(bytes.data(), &value, sizeof value);
    return bytes;
}

template <typename T>
T value_at(const std::string& bytes, std::size_t offset) {
    T value{};
    std::memcpy(&value, bytes.data() + offset, sizeof value);
    return value;
}

inline std::uint64_t xxh3(const std::string& bytes, std::size_t offset, std::size_t length) {
    return XXH3_64bits(bytes.data() + offset, length);
}

// Sets a header field and recomputes the header checksum, so that only the field's own check fires.
template <typename T>
std::string with_header_field(std::string bytes, std::size_t offset, T value) {
    bytes.replace(offset, sizeof value, bytes_of(value));
    bytes.replace(kHeaderChecksumOffset, 8, bytes_of(xxh3(bytes, 0, kHeaderChecksumOffset)));
    return bytes;
}

// The file with one section's payload replaced by one of any length: its length field and checksum
// follow, and the sections after it move.
inline std::string with_section(const std::string& bytes, const VlatSection& section, const std::string& payload) {
    return bytes.substr(0, section.offset - 8) + bytes_of(static_cast<std::uint64_t>(payload.size())) + payload +
           bytes_of(XXH3_64bits(payload.data(), payload.size())) + bytes.substr(section.offset + section.length + 8);
}

}  // namespace vlattice::test
