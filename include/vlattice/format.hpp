// The compressed .vlat file: a versioned little-endian header followed by checksummed sections.
// docs/format.md is the specification; this header is its C++ face.
#pragma once

#include "vlattice/product_codes.hpp"
#include "vlattice/residual.hpp"
#include "vlattice/types.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace vlattice {

// Files without residual codes are written as version 1, files with scalar codes as version 2 (which
// adds the RESI section), files with product codes as version 3 (ROTN, CDBK, CODE), or as version 4
// when the product code has more than one additive stage (CDBK also holds the stage count); the
// reader takes all four. In every version a file with n = 0 is a model: anchors (and the scalar
// ranges or the product codebook) without vectors, for encoding vectors later.
inline constexpr std::uint32_t kVlatVersion = 1;
inline constexpr std::uint32_t kVlatVersionWithCodes = 2;
inline constexpr std::uint32_t kVlatVersionProduct = 3;
inline constexpr std::uint32_t kVlatVersionStaged = 4;

enum class AnchorStorage : std::uint8_t { f32 = 0, f16 = 1 };

// Residual codec of the file: none (version 1), per-anchor scalar quantisation (version 2, RESI), or
// rotated product codes (version 3, ROTN + CDBK + CODE; version 4 with additive stages).
enum class ResidualCodec : std::uint8_t { none = 0, scalar = 1, product = 2 };

struct VlatSection {
    std::string tag;             // four characters: "ANCH", "ASGN", "RESI", "ROTN", "CDBK", "CODE", "META"
    std::uint64_t offset = 0;    // of the payload, from the start of the file
    std::uint64_t length = 0;    // payload bytes
    std::uint64_t checksum = 0;  // XXH3-64 of the payload
};

struct VlatFile {
    std::uint64_t n = 0;  // number of vectors; 0 in a model
    std::uint32_t d = 0;  // dimension
    Metric metric = Metric::l2;
    AnchorStorage anchor_storage = AnchorStorage::f32;
    ResidualCodec codec = ResidualCodec::none;
    Matrix anchors;                          // m x d
    std::vector<std::uint32_t> assignments;  // n anchor ids, each < m
    ResidualCodes residuals;                 // not empty exactly when codec is scalar
    ProductCodes product;                    // not empty exactly when codec is product
    std::string metadata_json;               // run metadata; must be deterministic for a given run

    std::vector<VlatSection> sections;  // filled by read_vlat; ignored by write_vlat
    std::uint64_t file_bytes = 0;       // filled by read_vlat
};

// Writes through AtomicFile. Throws Error if the contents are inconsistent (an assignment >= m,
// a row count that does not match n, codes of a kind other than the codec's, a product codebook that
// check_product_codebook refuses).
void write_vlat(const std::string& path, const VlatFile& file);

// Throws Error naming the file and the problem: wrong magic, unknown version, bad header or
// section checksum (naming the section), truncated section, inconsistent sizes.
VlatFile read_vlat(const std::string& path);

// The version write_vlat gives this file: 1 without residual codes, 2 with scalar codes, 3 with
// product codes.
std::uint32_t format_version(const VlatFile& file);

// Bytes per vector of the codes alone, as FAISS counts its code sizes: the packed assignments plus the
// residual codes, divided by n. Everything else (header, anchors, ranges, codebook, metadata) is per
// file. Throws Error for a model (n = 0).
double code_bytes_per_vector(const VlatFile& file);

// What decides the length of a .vlat (vlat_file_bytes), without the values: enough to size a file
// before its codes are trained.
struct VlatShape {
    std::uint64_t n = 0;
    std::uint64_t d = 0;
    std::uint64_t m = 0;
    AnchorStorage storage = AnchorStorage::f32;
    ResidualCodec codec = ResidualCodec::none;
    std::uint64_t scalar_code_bytes = 0;  // codec scalar: C, bytes of one vector's code
    std::uint64_t rotated_dims = 0;       // codec product: p
    std::uint64_t subspaces = 0;          // M
    std::uint64_t stages = 1;             // S
    unsigned bits = 8;                    // b
    std::uint64_t metadata_bytes = 2;     // META's payload ("{}" for no metadata)
};

VlatShape vlat_shape(const VlatFile& file);

// Sets the shape's codec and code fields from the residual code of a file or a trained candidate.
void set_code_shape(VlatShape& shape, ResidualCodec codec, const ResidualCodes& scalar,
                    const ProductCodebook& product);

// The bytes write_vlat writes for a file of this shape: header, every section's frame, payload and
// checksum (docs/format.md).
std::uint64_t vlat_file_bytes(const VlatShape& shape);

// Bits per packed assignment: ceil(log2 m), 0 when m == 1.
unsigned assignment_bits(std::uint64_t m);
// Packs each value's low `bits` bits, least significant bit first, into a byte stream.
std::vector<std::uint8_t> pack_bits(const std::vector<std::uint32_t>& values, unsigned bits);
std::vector<std::uint32_t> unpack_bits(const std::vector<std::uint8_t>& bytes, unsigned bits, std::size_t count);

}  // namespace vlattice
