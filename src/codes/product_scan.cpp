// The layout, the per-vector terms and the per-query tables of the product-code scan
// (src/codes/product_scan.hpp).
#include "codes/product_scan.hpp"

#include "codes/rotation.hpp"

#include "numeric.hpp"

#include <algorithm>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define VLATTICE_GATHER_SUMS 1
#endif

namespace vlattice {

namespace {

Matrix transposed(const Matrix& a) {
    Matrix t(a.cols, a.rows);
    for (std::size_t r = 0; r < a.rows; ++r) {
        for (std::size_t c = 0; c < a.cols; ++c) {
            t.row(c)[r] = a.row(r)[c];
        }
    }
    return t;
}

// out[c] <- sum over k < count of rows[k][c] * x[k], in k order, for c < width, row k at
// rows + k * stride: each out[c] is its own sum in its own order, and the loop over c vectorises.
VLATTICE_ALSO_FOR_X86_64_V3_V4
void ordered_columns(const float* rows, std::size_t width, std::size_t stride, const float* x, std::size_t count,
                     float* out) {
    std::fill(out, out + width, 0.0f);
    for (std::size_t k = 0; k < count; ++k) {
        const float* row = rows + k * stride;
        const float xk = x[k];
        for (std::size_t c = 0; c < width; ++c) {
            out[c] += row[c] * xk;
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
// block_sums by AVX2 gathers, lane v adding exactly what block_sums adds to sum[v], in the same
// order. GCC's generic tuning loads each lane of a gather on its own, which took 1.5 times as long.
__attribute__((target("avx2"))) void gathered_block_sums(const std::uint8_t* codes, std::size_t blocks,
                                                         std::size_t code_bytes, const float* tables, float* sums) {
    static_assert(kScanBlock == 16, "two gathers of 8 lanes per block");
    for (std::size_t block = 0; block < blocks; ++block) {
        __m256 low = _mm256_setzero_ps();
        __m256 high = _mm256_setzero_ps();
        const std::uint8_t* code = codes + block * code_bytes * kScanBlock;
        for (std::size_t b = 0; b < code_bytes; ++b) {
            const float* table = tables + b * kByteValues;
            const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(code + b * kScanBlock));
            low = _mm256_add_ps(low, _mm256_i32gather_ps(table, _mm256_cvtepu8_epi32(bytes), 4));
            high = _mm256_add_ps(high, _mm256_i32gather_ps(table, _mm256_cvtepu8_epi32(_mm_srli_si128(bytes, 8)), 4));
        }
        _mm256_storeu_ps(sums + block * kScanBlock, low);
        _mm256_storeu_ps(sums + block * kScanBlock + 8, high);
    }
}
#endif

}  // namespace

void block_sums(const std::uint8_t* codes, std::size_t blocks, std::size_t code_bytes, const float* tables,
                float* sums) {
    for (std::size_t block = 0; block < blocks; ++block) {
        float sum[kScanBlock] = {};
        const std::uint8_t* code = codes + block * code_bytes * kScanBlock;
        for (std::size_t b = 0; b < code_bytes; ++b) {
            const float* table = tables + b * kByteValues;
            const std::uint8_t* bytes = code + b * kScanBlock;
            for (std::size_t v = 0; v < kScanBlock; ++v) {
                sum[v] += table[bytes[v]];
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

ProductTables::ProductTables(const ProductCodebook& book)
    : book_(book), centroids_t_(transposed(book.centroids)) {}

void ProductTables::byte_tables(const float* rotated, float* tables, float* sub) const {
    const std::size_t count = book_.table();
    const std::size_t codes = book_.codes();
    const std::size_t subspaces = book_.subspaces();
    // Q_j of one code, into `out`.
    const auto subspace_table = [&](std::size_t j, float* out) {
        const std::size_t sub = j % subspaces;
        const std::size_t first = book_.bounds[sub];
        ordered_columns(centroids_t_.row(first) + j / subspaces * count, count, centroids_t_.cols, rotated + first,
                        book_.bounds[sub + 1] - first, out);
    };
    for (std::size_t b = 0; b < book_.code_bytes(); ++b) {
        float* table = tables + b * kByteValues;
        if (book_.bits == 8) {
            subspace_table(b, table);
            continue;
        }
        const float* low = sub;
        const float* high = sub + 16;
        subspace_table(2 * b, sub);
        const bool pair = 2 * b + 1 < codes;
        if (pair) {
            subspace_table(2 * b + 1, sub + 16);
        }
        for (std::size_t x = 0; x < kByteValues; ++x) {
            table[x] = pair ? low[x & 15] + high[x >> 4] : low[x & 15];
        }
    }
}

ProductScan product_scan(const VlatFile& file) {
    const ProductCodebook& book = file.product.book;
    const std::size_t cb = book.code_bytes();
    ProductScan scan;
    scan.lists = member_lists(file.assignments, file.anchors.rows);
    const std::vector<std::uint32_t>& members = scan.lists.members;
    const std::size_t n = members.size();
    scan.codes.assign((n + kScanBlock - 1) / kScanBlock * cb * kScanBlock, 0);
    const auto count = static_cast<std::ptrdiff_t>(n);
#pragma omp parallel for schedule(static)
    for (std::ptrdiff_t pp = 0; pp < count; ++pp) {
        const auto p = static_cast<std::size_t>(pp);
        const std::uint8_t* code = file.product.codes.data() + std::size_t{members[p]} * cb;
        std::uint8_t* to = scan.codes.data() + p / kScanBlock * cb * kScanBlock + p % kScanBlock;
        for (std::size_t b = 0; b < cb; ++b) {
            to[b * kScanBlock] = code[b];
        }
    }
    if (file.metric == Metric::ip) {
        return scan;
    }
    scan.extra.resize(n);
    // All anchors at once, blocked, in the order rotate_rows fixes, as the GPU's search repeats it.
    const Matrix rotated = rotate_rows(book.rotation, file.anchors);
    const auto m = static_cast<std::ptrdiff_t>(file.anchors.rows);
#pragma omp parallel
    {
        std::vector<float> z(book.coded_dims());
#pragma omp for schedule(dynamic, 16)
        for (std::ptrdiff_t a = 0; a < m; ++a) {
            const float* rc = rotated.row(static_cast<std::size_t>(a));
            for (std::size_t p = scan.lists.start[a]; p < scan.lists.start[a + 1]; ++p) {
                const std::uint8_t* code = file.product.codes.data() + std::size_t{members[p]} * cb;
                scan.extra[p] = vector_extra(book, code, rc, z.data());
            }
        }
    }
    return scan;
}

}  // namespace vlattice
