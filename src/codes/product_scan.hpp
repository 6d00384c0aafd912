// What the CPU and the GPU scan product codes with (the asymmetric score of include/vlattice/search.hpp):
// the codes of each anchor's members laid out for lookups in bulk, each vector's e, and the
// per-query tables. The file-wide parts are built once per search, on the CPU, and the GPU reads
// the same bits.
#pragma once

#include "member_lists.hpp"
#include "vlattice/format.hpp"
#include "vlattice/product_codes.hpp"
#include "vlattice/types.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace vlattice {

// The codes of this many consecutive members (MemberLists order) are stored unit by unit, so that
// one table lookup serves a whole row of SIMD lanes (CPU) or of threads (GPU).
constexpr std::size_t kScanBlock = 16;
// Entries of a code byte's table.
constexpr std::size_t kByteValues = 256;

// What one table lookup of the scan covers: a code byte for codes of 4 or 8 bits (two 4-bit codes
// share the table of their sums), one code for wider ones, its index then stored in two bytes.
struct ScanUnits {
    std::size_t count = 0;   // lookups per vector: code bytes, or codes
    std::size_t values = 0;  // entries of each lookup's table: kByteValues, or 2^b
    std::size_t width = 1;   // bytes of a lookup's index in the layout: 1, or 2 (little-endian)
};
ScanUnits scan_units(const ProductCodebook& book);

struct ProductScan {
    MemberLists lists;
    ScanUnits units;
    // The index of lookup u of the vector at member position p (lists.members[p]) starts at byte
    // (((p / kScanBlock) * units.count + u) * kScanBlock + p % kScanBlock) * units.width; zeros pad
    // the last block.
    std::vector<std::uint8_t> codes;
    // The e of the vector at member position p; empty for metric ip, which does not use it.
    std::vector<float> extra;
};

// The file's parts must fit together (check_compressed_set).
ProductScan product_scan(const VlatFile& file);

// sums[v] <- S of the v-th vector of `blocks` blocks of laid-out codes (ProductScan::codes) and a
// query's tables, the lookups added in order for every vector, kScanBlock vectors side by side.
void block_sums(const std::uint8_t* codes, std::size_t blocks, const ScanUnits& units, const float* tables,
                float* sums);
using BlockSums = decltype(&block_sums);
// block_sums, or on a CPU with AVX2 the same sums by its gathers.
BlockSums fastest_block_sums();

// The centroids transposed, so that the table sums of search.hpp vectorise across centroids while
// each still runs in its own order. Queries and anchors are rotated by rotate_rows
// (codes/rotation.hpp).
class ProductTables {
public:
    explicit ProductTables(const ProductCodebook& book);

    // tables[u * units.values + x] <- T_u[x] of the query whose rotation is `rotated`, for every
    // lookup u of scan_units(book); `sub` holds kByteValues floats.
    void unit_tables(const float* rotated, float* tables, float* sub) const;

private:
    const ProductCodebook& book_;
    Matrix centroids_t_;  // p x S 2^bits
};

}  // namespace vlattice
