// The layout, the per-vector terms and the per-query tables of the product-code scan
// (src/codes/product_scan.hpp).
#include "codes/product_scan.hpp"

#include "codes/rotation.hpp"

#include "numeric.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define VLATTICE_GATHER_SUMS 1
#endif

namespace vlattice {

namespace {

// Table entries a batch of queries' tables may take (ProductTables::batch_queries).
constexpr std::size_t kBatchTableValues = std::size_t{1} << 16;

// Stages whose codes the gathered e holds in registers; files with more take the loop of vector_extra.
constexpr std::size_t kMostScanStages = 16;

Matrix transposed(const Matrix& a) {
    Matrix t(a.cols, a.rows);
    for (std::size_t r = 0; r < a.rows; ++r) {
        for (std::size_t c = 0; c < a.cols; ++c) {
            t.row(c)[r] = a.row(r)[c];
        }
    }
    return t;
}

// out[i][c] <- sum over k < count of rows[k][c] * x[i][k], in k order, for c < width and each of
// `queries` vectors x[i], row k at rows + k * stride: each out[i][c] is its own sum in its own order,
// the loop over c vectorises, and each row, read once, serves every query.
// Columns are summed kColumnRun at a time in a local run the compiler keeps in registers: summed
// in place, each step's loads waited on the stores of the step before.
VLATTICE_ALSO_FOR_X86_64_V3_V4
void ordered_columns(const float* rows, std::size_t width, std::size_t stride, const float* const* x,
                     std::size_t queries, std::size_t count, float* const* out) {
    constexpr std::size_t kColumnRun = 64;
    std::size_t c0 = 0;
    for (; c0 + kColumnRun <= width; c0 += kColumnRun) {
        for (std::size_t i = 0; i < queries; ++i) {
            float run[kColumnRun] = {};
            for (std::size_t k = 0; k < count; ++k) {
                const float* row = rows + k * stride + c0;
                const float xk = x[i][k];
                for (std::size_t c = 0; c < kColumnRun; ++c) {
                    run[c] += row[c] * xk;
                }
            }
            std::copy(run, run + kColumnRun, out[i] + c0);
        }
    }
    for (std::size_t i = 0; i < queries; ++i) {
        std::fill(out[i] + c0, out[i] + width, 0.0f);
    }
    for (std::size_t k = 0; k < count && c0 < width; ++k) {
        const float* row = rows + k * stride;
        for (std::size_t i = 0; i < queries; ++i) {
            const float xk = x[i][k];
            float* to = out[i];
            for (std::size_t c = c0; c < width; ++c) {
                to[c] += row[c] * xk;
            }
        }
    }
}

// e = sum over t of z[t] * (z[t] + 2 * rc[t]), z = code_values of the vector's code; `z` holds p
// floats of scratch.
float vector_extra(const ProductCodebook& book, const std::uint8_t* code, const float* rc, float* z) {
    code_values(book, code, z);
    float e = 0.0f;
    for (std::size_t t = 0; t < book.coded_dims(); ++t) {
        e += z[t] * (z[t] + 2.0f * rc[t]);
    }
    return e;
}

#ifdef VLATTICE_GATHER_SUMS
// The 16 lanes' values of lookup u of one block of laid-out codes, as two halves of 8 indices.
__attribute__((target("avx2"))) inline void lane_indices(const std::uint8_t* block_codes, std::size_t u,
                                                         std::size_t width, __m256i& low, __m256i& high) {
    static_assert(kScanBlock == 16, "two halves of 8 lanes per block");
    const std::uint8_t* at = block_codes + u * kScanBlock * width;
    if (width == 1) {
        const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(at));
        low = _mm256_cvtepu8_epi32(bytes);
        high = _mm256_cvtepu8_epi32(_mm_srli_si128(bytes, 8));
        return;
    }
    low = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(at)));
    high = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(at + 16)));
}

// vector_extra of the kScanBlock vectors of one block of laid-out codes (ProductScan::codes) at once,
// lane v adding exactly what vector_extra adds for its vector, in the same order: per rotated
// coordinate t, z (its stages' centroid values, added stage by stage) times z + 2 Rc[t] of the
// lane's anchor. `centroids_t` is the centroids transposed (p x S 2^b), `rotated` the rotated
// anchors (m x p), `rows` where each lane's anchor starts in it (its id times p).
__attribute__((target("avx2"))) void gathered_extras(const ProductCodebook& book, const ScanUnits& units,
                                                     const std::uint8_t* block_codes, const float* centroids_t,
                                                     const float* rotated, const std::int32_t* rows, float* extras) {
    const std::size_t subspaces = book.subspaces();
    const std::size_t table = book.table();
    const std::size_t row = book.stages * table;
    // Both halves in one pass over t: two chains of adds, each waiting on its own.
    const __m256i low_rows = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows));
    const __m256i high_rows = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows + 8));
    const __m256 two = _mm256_set1_ps(2.0f);
    __m256 low = _mm256_setzero_ps();
    __m256 high = _mm256_setzero_ps();
    for (std::size_t j = 0; j < subspaces; ++j) {
        __m256i low_codes[kMostScanStages];
        __m256i high_codes[kMostScanStages];
        for (std::size_t stage = 0; stage < book.stages; ++stage) {
            const std::size_t code = stage * subspaces + j;
            __m256i low_value;
            __m256i high_value;
            lane_indices(block_codes, book.bits == 4 ? code / 2 : code, units.width, low_value, high_value);
            if (book.bits == 4) {
                const int shift = static_cast<int>(4 * (code % 2));
                low_value = _mm256_and_si256(_mm256_srli_epi32(low_value, shift), _mm256_set1_epi32(15));
                high_value = _mm256_and_si256(_mm256_srli_epi32(high_value, shift), _mm256_set1_epi32(15));
            }
            const __m256i offset = _mm256_set1_epi32(static_cast<int>(stage * table));
            low_codes[stage] = _mm256_add_epi32(low_value, offset);
            high_codes[stage] = _mm256_add_epi32(high_value, offset);
        }
        for (std::size_t t = book.bounds[j]; t < book.bounds[j + 1]; ++t) {
            const float* values = centroids_t + t * row;
            __m256 low_z = _mm256_i32gather_ps(values, low_codes[0], 4);
            __m256 high_z = _mm256_i32gather_ps(values, high_codes[0], 4);
            for (std::size_t stage = 1; stage < book.stages; ++stage) {
                low_z = _mm256_add_ps(low_z, _mm256_i32gather_ps(values, low_codes[stage], 4));
                high_z = _mm256_add_ps(high_z, _mm256_i32gather_ps(values, high_codes[stage], 4));
            }
            const __m256 low_twice = _mm256_mul_ps(two, _mm256_i32gather_ps(rotated + t, low_rows, 4));
            const __m256 high_twice = _mm256_mul_ps(two, _mm256_i32gather_ps(rotated + t, high_rows, 4));
            low = _mm256_add_ps(low, _mm256_mul_ps(low_z, _mm256_add_ps(low_z, low_twice)));
            high = _mm256_add_ps(high, _mm256_mul_ps(high_z, _mm256_add_ps(high_z, high_twice)));
        }
    }
    _mm256_storeu_ps(extras, low);
    _mm256_storeu_ps(extras + 8, high);
}

// block_sums by AVX2 gathers, lane v adding exactly what block_sums adds to sum[v], in the same
// order. GCC's generic tuning loads each lane of a gather on its own, which took 1.5 times as long.
__attribute__((target("avx2"))) void gathered_block_sums(const std::uint8_t* codes, std::size_t blocks,
                                                         const ScanUnits& units, const float* tables, float* sums) {
    for (std::size_t block = 0; block < blocks; ++block) {
        __m256 low = _mm256_setzero_ps();
        __m256 high = _mm256_setzero_ps();
        const std::uint8_t* code = codes + block * units.count * kScanBlock * units.width;
        for (std::size_t u = 0; u < units.count; ++u) {
            const float* table = tables + u * units.values;
            __m256i low_index;
            __m256i high_index;
            lane_indices(code, u, units.width, low_index, high_index);
            low = _mm256_add_ps(low, _mm256_i32gather_ps(table, low_index, 4));
            high = _mm256_add_ps(high, _mm256_i32gather_ps(table, high_index, 4));
        }
        _mm256_storeu_ps(sums + block * kScanBlock, low);
        _mm256_storeu_ps(sums + block * kScanBlock + 8, high);
    }
}
#endif

}  // namespace

void block_sums(const std::uint8_t* codes, std::size_t blocks, const ScanUnits& units, const float* tables,
                float* sums) {
    for (std::size_t block = 0; block < blocks; ++block) {
        float sum[kScanBlock] = {};
        const std::uint8_t* code = codes + block * units.count * kScanBlock * units.width;
        for (std::size_t u = 0; u < units.count; ++u) {
            const float* table = tables + u * units.values;
            const std::uint8_t* index = code + u * kScanBlock * units.width;
            for (std::size_t v = 0; v < kScanBlock; ++v) {
                sum[v] += table[units.width == 1 ? index[v] : index[2 * v] | index[2 * v + 1] << 8];
            }
        }
        std::copy(sum, sum + kScanBlock, sums + block * kScanBlock);
    }
}

BlockSums fastest_block_sums() {
#ifdef VLATTICE_GATHER_SUMS
    if (__builtin_cpu_supports("avx2")) {
        return gathered_block_sums;
    }
#endif
    return block_sums;
}

ProductTables::ProductTables(const ProductCodebook& book, const Matrix& centroids_t)
    : book_(book), centroids_t_(centroids_t) {}

std::size_t ProductTables::batch_queries() const {
    const ScanUnits units = scan_units(book_);
    const std::size_t values = units.count * units.values;
    return std::clamp<std::size_t>(kBatchTableValues / std::max<std::size_t>(values, 1), 1, kMostBatchQueries);
}

void ProductTables::unit_tables(const float* const* rotated, std::size_t queries, float* const* tables) const {
    const std::size_t count = book_.table();
    const std::size_t codes = book_.codes();
    const std::size_t subspaces = book_.subspaces();
    const float* from[kMostBatchQueries];
    float* into[kMostBatchQueries];
    // Q_j of code j for every query, into out[i] + offset.
    const auto subspace_tables = [&](std::size_t j, float* const* out, std::size_t offset) {
        const std::size_t sub = j % subspaces;
        const std::size_t first = book_.bounds[sub];
        for (std::size_t i = 0; i < queries; ++i) {
            from[i] = rotated[i] + first;
            into[i] = out[i] + offset;
        }
        ordered_columns(centroids_t_.row(first) + j / subspaces * count, count, centroids_t_.cols, from, queries,
                        book_.bounds[sub + 1] - first, into);
    };
    if (book_.bits != 4) {
        for (std::size_t j = 0; j < codes; ++j) {
            subspace_tables(j, tables, j * count);
        }
        return;
    }
    float halves[kMostBatchQueries][32];
    float* half[kMostBatchQueries];
    for (std::size_t i = 0; i < queries; ++i) {
        half[i] = halves[i];
    }
    for (std::size_t b = 0; b < book_.code_bytes(); ++b) {
        subspace_tables(2 * b, half, 0);
        const bool pair = 2 * b + 1 < codes;
        if (pair) {
            subspace_tables(2 * b + 1, half, 16);
        }
        for (std::size_t i = 0; i < queries; ++i) {
            const float* low = halves[i];
            const float* high = halves[i] + 16;
            float* table = tables[i] + b * kByteValues;
            for (std::size_t x = 0; x < kByteValues; ++x) {
                table[x] = pair ? low[x & 15] + high[x >> 4] : low[x & 15];
            }
        }
    }
}

ScanUnits scan_units(const ProductCodebook& book) {
    if (book.bits <= 8) {
        return {book.code_bytes(), kByteValues, 1};
    }
    return {book.codes(), book.table(), 2};
}

ProductScan product_scan(const VlatFile& file, bool extras) {
    const ProductCodebook& book = file.product.book;
    const std::size_t cb = book.code_bytes();
    ProductScan scan;
    scan.lists = member_lists(file.assignments, file.anchors.rows);
    scan.units = scan_units(book);
    const ScanUnits& units = scan.units;
    const std::size_t block_bytes = units.count * kScanBlock * units.width;
    const std::vector<std::uint32_t>& members = scan.lists.members;
    const std::size_t n = members.size();
    scan.codes.assign((n + kScanBlock - 1) / kScanBlock * block_bytes, 0);
    const auto count = static_cast<std::ptrdiff_t>(n);
#pragma omp parallel for schedule(static)
    for (std::ptrdiff_t pp = 0; pp < count; ++pp) {
        const auto p = static_cast<std::size_t>(pp);
        const std::uint8_t* code = file.product.codes.data() + std::size_t{members[p]} * cb;
        std::uint8_t* to = scan.codes.data() + p / kScanBlock * block_bytes + p % kScanBlock * units.width;
        for (std::size_t u = 0; u < units.count; ++u) {
            if (units.width == 1) {
                to[u * kScanBlock] = code[u];
                continue;
            }
            const unsigned value = product_code(code, book.bits, u);
            to[u * kScanBlock * 2] = static_cast<std::uint8_t>(value);
            to[u * kScanBlock * 2 + 1] = static_cast<std::uint8_t>(value >> 8);
        }
    }
    scan.centroids_t = transposed(book.centroids);
    if (extras) {
        add_extras(file, scan, std::vector<std::uint8_t>(file.anchors.rows, 1));
    }
    return scan;
}

void add_extras(const VlatFile& file, ProductScan& scan, const std::vector<std::uint8_t>& anchors) {
    if (file.metric == Metric::ip) {
        return;
    }
    const ProductCodebook& book = file.product.book;
    const std::size_t cb = book.code_bytes();
    const std::size_t p = book.coded_dims();
    const std::vector<std::uint32_t>& members = scan.lists.members;
    const std::size_t n = members.size();
    scan.extra.resize(n);
    scan.extra_done.resize((n + kScanBlock - 1) / kScanBlock, 0);
    std::vector<std::size_t> blocks;
    for (std::size_t a = 0; a < anchors.size(); ++a) {
        const std::size_t first = scan.lists.start[a];
        const std::size_t end = scan.lists.start[a + 1];
        if (!anchors[a] || first == end) {
            continue;
        }
        for (std::size_t block = first / kScanBlock; block <= (end - 1) / kScanBlock; ++block) {
            if (!scan.extra_done[block]) {
                scan.extra_done[block] = 1;
                blocks.push_back(block);
            }
        }
    }
    if (blocks.empty()) {
        return;
    }
    // The anchors of those blocks' members, each rotated once: a row's rotation does not depend on
    // the rows beside it, so a subset's rows have the bits all of them would.
    std::vector<std::int64_t> row_of(file.anchors.rows, -1);
    std::vector<std::uint32_t> rotated_anchors;
    for (const std::size_t block : blocks) {
        for (std::size_t q = block * kScanBlock; q < std::min(n, (block + 1) * kScanBlock); ++q) {
            const std::uint32_t a = file.assignments[members[q]];
            if (row_of[a] < 0) {
                row_of[a] = static_cast<std::int64_t>(rotated_anchors.size());
                rotated_anchors.push_back(a);
            }
        }
    }
    Matrix subset(rotated_anchors.size(), file.anchors.cols);
    for (std::size_t r = 0; r < rotated_anchors.size(); ++r) {
        std::copy(file.anchors.row(rotated_anchors[r]), file.anchors.row(rotated_anchors[r]) + subset.cols,
                  subset.row(r));
    }
    const Matrix rotated = rotate_rows(book.rotation, subset);
    const auto count = static_cast<std::ptrdiff_t>(blocks.size());
#ifdef VLATTICE_GATHER_SUMS
    // A vector's e is a sum of p terms in order, so it runs at the adder's latency: the vectors of a
    // block take a lane each instead, their anchors' Rc and their centroid values gathered.
    if (__builtin_cpu_supports("avx2") && book.stages <= kMostScanStages &&
        rotated.rows * p <= static_cast<std::size_t>(INT32_MAX)) {
        const Matrix& centroids_t = scan.centroids_t;
        const std::size_t block_bytes = scan.units.count * kScanBlock * scan.units.width;
#pragma omp parallel for schedule(static)
        for (std::ptrdiff_t bb = 0; bb < count; ++bb) {
            const std::size_t block = blocks[static_cast<std::size_t>(bb)];
            std::int32_t rows[kScanBlock] = {};
            float extras[kScanBlock];
            const std::size_t lanes = std::min(kScanBlock, n - block * kScanBlock);
            for (std::size_t v = 0; v < lanes; ++v) {
                rows[v] = static_cast<std::int32_t>(row_of[file.assignments[members[block * kScanBlock + v]]] *
                                                    static_cast<std::int64_t>(p));
            }
            gathered_extras(book, scan.units, scan.codes.data() + block * block_bytes, centroids_t.data.data(),
                            rotated.data.data(), rows, extras);
            std::copy(extras, extras + lanes, scan.extra.begin() + static_cast<std::ptrdiff_t>(block * kScanBlock));
        }
        return;
    }
#endif
#pragma omp parallel
    {
        std::vector<float> z(p);
#pragma omp for schedule(static)
        for (std::ptrdiff_t bb = 0; bb < count; ++bb) {
            const std::size_t block = blocks[static_cast<std::size_t>(bb)];
            for (std::size_t q = block * kScanBlock; q < std::min(n, (block + 1) * kScanBlock); ++q) {
                const std::uint32_t a = file.assignments[members[q]];
                const std::uint8_t* code = file.product.codes.data() + std::size_t{members[q]} * cb;
                scan.extra[q] = vector_extra(book, code, rotated.row(static_cast<std::size_t>(row_of[a])), z.data());
            }
        }
    }
}

}  // namespace vlattice
