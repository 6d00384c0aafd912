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

// The codes of this many consecutive members (MemberLists order) are stored byte by byte, so that
// one table lookup serves a whole row of SIMD lanes (CPU) or of threads (GPU).
constexpr std::size_t kScanBlock = 16;
// Entries of a code byte's table.
constexpr std::size_t kByteValues = 256;

struct ProductScan {
    MemberLists lists;
    // Code byte b of the vector at member position p (lists.members[p]) is at
    // ((p / kScanBlock) * code_bytes + b) * kScanBlock + p % kScanBlock; zeros pad the last block.
    std::vector<std::uint8_t> codes;
    // The e of the vector at member position p; empty for metric ip, which does not use it.
    std::vector<float> extra;
};

// The file's parts must fit together (check_compressed_set).
ProductScan product_scan(const VlatFile& file);

// sums[v] <- S of the v-th vector of `blocks` blocks of laid-out codes (ProductScan::codes) and a
// query's tables, the bytes added in order for every vector, kScanBlock vectors side by side.
void block_sums(const std::uint8_t* codes, std::size_t blocks, std::size_t code_bytes, const float* tables,
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

    // tables[b * kByteValues + x] <- T_b[x] of the query whose rotation is `rotated`, for every code
    // byte b; `sub` holds kByteValues floats.
    void byte_tables(const float* rotated, float* tables, float* sub) const;

private:
    const ProductCodebook& book_;
    Matrix centroids_t_;  // p x S 2^bits
};

}  // namespace vlattice
