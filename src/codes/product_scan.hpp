// What the CPU and the GPU scan product codes with (the asymmetric score of include/vlattice/search.hpp):
// the codes of each anchor's members laid out for lookups in bulk, each vector's e, and the
// per-query tables. The file-wide parts are built once per search, on the CPU, and the GPU reads
// the same bits.
#pragma once

#include "fit/member_lists.hpp"
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
// The most queries whose tables ProductTables builds at once.
constexpr std::size_t kMostBatchQueries = 8;

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
    // The e of the vector at member position p where its block's flag in extra_done is set; empty
    // for metric ip, which does not use it.
    std::vector<float> extra;
    std::vector<std::uint8_t> extra_done;  // per block of kScanBlock member positions
    // The codebook's centroids transposed, p x S 2^b, so that the sums over a sub-space's
    // coordinates run across centroids (the per-query tables) or gather them (e).
    Matrix centroids_t;
};

// The layout of the file's codes and, with `extras`, every vector's e. The file's parts must fit
// together (check_compressed_set).
ProductScan product_scan(const VlatFile& file, bool extras = true);

// The e of every member of the anchors whose flag in `anchors` (one per anchor) is set, and of the
// other members of their blocks, where not computed yet; each the bits product_scan gives it. A
// search that probes few anchors computes few: e needs the anchor's rotation Rc, p d products.
void add_extras(const VlatFile& file, ProductScan& scan, const std::vector<std::uint8_t>& anchors);

// sums[v] <- S of the v-th vector of `blocks` blocks of laid-out codes (ProductScan::codes) and a
// query's tables, the lookups added in order for every vector, kScanBlock vectors side by side.
void block_sums(const std::uint8_t* codes, std::size_t blocks, const ScanUnits& units, const float* tables,
                float* sums);
using BlockSums = decltype(&block_sums);
// block_sums, or on a CPU with AVX2 the same sums by its gathers.
BlockSums fastest_block_sums();

// The per-query tables of search.hpp, from the scan's transposed centroids, so that the table sums
// vectorise across centroids while each still runs in its own order. Queries and anchors are
// rotated by rotate_rows (codes/rotation.hpp).
class ProductTables {
public:
    // Both must outlive the tables.
    ProductTables(const ProductCodebook& book, const Matrix& centroids_t);

    // Queries whose tables unit_tables builds at once: as many as keep their tables within a few
    // hundred KiB, so that each centroid row read serves them all; at least 1.
    std::size_t batch_queries() const;
    // tables[i][u * units.values + x] <- T_u[x] of the query whose rotation is rotated[i], for
    // every lookup u of scan_units(book) and i < queries <= batch_queries().
    void unit_tables(const float* const* rotated, std::size_t queries, float* const* tables) const;

private:
    const ProductCodebook& book_;
    const Matrix& centroids_t_;  // ProductScan::centroids_t
};

}  // namespace vlattice
