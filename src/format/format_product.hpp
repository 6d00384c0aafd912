// The payloads of the product-code sections of a .vlat version 3 or 4 file, ROTN, CDBK and CODE
// (docs/format.md). format.cpp frames and checksums every section; this encodes these three, gives
// the length each must have from the fields it opens with (read before the payload, which is
// allocated only once its length is known to be right), and decodes them.
#pragma once

#include "io/binary_file.hpp"
#include "vlattice/product_codes.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace vlattice {

// The length a section's payload must have, and what sets it ("p = 3 and d = 6"), for the message
// a payload of another length gets. Every section but META has one.
struct SectionLength {
    std::uint64_t bytes = 0;
    std::string from;
};

namespace product_sections {

using Bytes = std::vector<std::uint8_t>;

// Payload bytes of a p x d rotation, and of a codebook of M sub-spaces, S stages of 2^bits centroids
// over p rotated coordinates (a version 4 head when S > 1). Sizes a file can hold: no overflow.
std::uint64_t rotation_bytes(std::uint64_t p, std::uint64_t d);
std::uint64_t codebook_bytes(unsigned bits, std::uint64_t subspaces, std::uint64_t stages, std::uint64_t p);

Bytes encode_rotation(const ProductCodebook& book);
Bytes encode_codebook(const ProductCodebook& book);

// Each reads the fields the section opens with at `offset` of `in` (the payload has `length`
// bytes) and throws Error naming the file and the section on a value the format does not allow.
// `staged`: a version 4 codebook, whose head also holds the stage count S (2 or more).
SectionLength rotation_length(io::BinaryFile& in, std::uint64_t offset, std::uint64_t length, std::uint32_t d);
SectionLength codebook_length(io::BinaryFile& in, std::uint64_t offset, std::uint64_t length, std::size_t p,
                              bool staged);
SectionLength codes_length(const std::string& path, std::uint64_t n, const ProductCodebook& book);

// The payloads have the lengths above. The codebook's bounds, values and rotation are checked once
// the whole file is read (check_product_codebook needs the anchors); the codes' unused bits here.
void decode_rotation(const Bytes& payload, std::uint32_t d, ProductCodebook& book);
void decode_codebook(const Bytes& payload, bool staged, ProductCodebook& book);
void decode_codes(const std::string& path, Bytes payload, std::uint64_t n, ProductCodes& codes);

}  // namespace product_sections

}  // namespace vlattice
