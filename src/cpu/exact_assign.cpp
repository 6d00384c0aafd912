#include "cpu/exact_assign.hpp"

#include "numeric.hpp"

#include <cblas.h>
#include <immintrin.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <string>

namespace vlattice::cpu {

namespace {

// Rows of points per GEMM: enough to keep the GEMM efficient, few enough that the block of
// distances (rows x m floats) stays around 16 MiB.
std::size_t block_rows(std::size_t m) {
    return std::clamp<std::size_t>((std::size_t{1} << 22) / std::max<std::size_t>(m, 1), 64, 8192);
}

// Worst-case error of the float32 distance ||x||^2 + ||c||^2 - 2 fl(x.c), relative to ||x||^2 + ||c||^2:
// the dot product of length d is off by at most d*u*||x||*||c|| <= d*u*(||x||^2 + ||c||^2)/2 for any
// summation order (Higham, Accuracy and Stability, 3.1), and the rounded norms and the two additions
// add a few more units of u. (d + 8) u covers all of it.
float rounding_factor(std::size_t d) {
    return static_cast<float>(d + 8) * std::numeric_limits<float>::epsilon() * 0.5f;
}

// Per point, the fast pass compares m values where the GEMM did d m multiply-adds, so at small d
// (sub-space fits of a product code) it is the assign's cost, and it has an AVX2 copy (the compiler
// keeps a running minimum and a search scalar). Both copies compute every value with the same
// operations, in float.

// The products in `row` become fast distances (anchor `excluded`, if below m, at +inf); returns the
// first index of the smallest, NaN left out (0 when none is finite).
std::uint32_t fast_distances(float* row, const float* anchor_norms, float x_norm, std::size_t m,
                             std::size_t excluded) {
    float best = std::numeric_limits<float>::infinity();
    std::uint32_t best_j = 0;
    for (std::size_t j = 0; j < m; ++j) {
        row[j] = j == excluded ? std::numeric_limits<float>::infinity() : x_norm + anchor_norms[j] - 2.0f * row[j];
        if (row[j] < best) {
            best = row[j];
            best_j = static_cast<std::uint32_t>(j);
        }
    }
    return best_j;
}

__attribute__((target("avx2,bmi"))) std::uint32_t fast_distances_avx2(float* row, const float* anchor_norms,
                                                                       float x_norm, std::size_t m,
                                                                       std::size_t excluded) {
    const __m256 norm = _mm256_set1_ps(x_norm);
    const __m256 two = _mm256_set1_ps(2.0f);
    __m256 least = _mm256_set1_ps(std::numeric_limits<float>::infinity());
    std::size_t j = 0;
    for (; j + 8 <= m; j += 8) {
        const __m256 distance = _mm256_sub_ps(_mm256_add_ps(norm, _mm256_loadu_ps(anchor_norms + j)),
                                              _mm256_mul_ps(two, _mm256_loadu_ps(row + j)));
        _mm256_storeu_ps(row + j, distance);
    }
    for (; j < m; ++j) {
        row[j] = x_norm + anchor_norms[j] - 2.0f * row[j];
    }
    if (excluded < m) {
        row[excluded] = std::numeric_limits<float>::infinity();
    }
    for (j = 0; j + 8 <= m; j += 8) {
        least = _mm256_min_ps(_mm256_loadu_ps(row + j), least);  // a NaN in row keeps `least`
    }
    float lanes[8];
    _mm256_storeu_ps(lanes, least);
    float best = lanes[0];
    for (int l = 1; l < 8; ++l) {
        best = lanes[l] < best ? lanes[l] : best;
    }
    for (; j < m; ++j) {
        best = row[j] < best ? row[j] : best;
    }
    if (!(best < std::numeric_limits<float>::infinity())) {
        return 0;
    }
    const __m256 wanted = _mm256_set1_ps(best);
    for (j = 0; j + 8 <= m; j += 8) {
        const int equal = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(row + j), wanted, _CMP_EQ_OQ));
        if (equal != 0) {
            return static_cast<std::uint32_t>(j + _tzcnt_u32(static_cast<unsigned>(equal)));
        }
    }
    for (; j < m; ++j) {
        if (row[j] == best) {
            return static_cast<std::uint32_t>(j);
        }
    }
    return 0;
}

// The indices j, increasing, with row[j] <= threshold, into `out`; returns their count.
std::size_t within(const float* row, std::size_t m, float threshold, std::uint32_t* out) {
    std::size_t count = 0;
    for (std::size_t j = 0; j < m; ++j) {
        if (row[j] <= threshold) {
            out[count++] = static_cast<std::uint32_t>(j);
        }
    }
    return count;
}

__attribute__((target("avx2,bmi"))) std::size_t within_avx2(const float* row, std::size_t m, float threshold,
                                                             std::uint32_t* out) {
    const __m256 bound = _mm256_set1_ps(threshold);
    std::size_t count = 0;
    std::size_t j = 0;
    for (; j + 8 <= m; j += 8) {
        unsigned hits =
            static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(row + j), bound, _CMP_LE_OQ)));
        while (hits != 0) {
            out[count++] = static_cast<std::uint32_t>(j + _tzcnt_u32(hits));
            hits &= hits - 1;
        }
    }
    for (; j < m; ++j) {
        if (row[j] <= threshold) {
            out[count++] = static_cast<std::uint32_t>(j);
        }
    }
    return count;
}

}  // namespace

std::size_t assign_nearest(const Matrix& points, const std::vector<float>& point_norms, const Matrix& anchors,
                           AssignPrecision precision, std::vector<std::uint32_t>& assignment,
                           std::vector<double>& distance, const std::vector<std::uint32_t>* excluded) {
    const std::size_t n = points.rows;
    const std::size_t m = anchors.rows;
    const std::size_t d = points.cols;
    std::vector<float> anchor_norms(m);
    for (std::size_t j = 0; j < m; ++j) {
        anchor_norms[j] = static_cast<float>(squared_norm(anchors.row(j), d));
    }
    const float max_anchor_norm = *std::max_element(anchor_norms.begin(), anchor_norms.end());
    // Fast precision: a bound of zero re-scores only the float32 argmin itself.
    const float factor = precision == AssignPrecision::exact ? rounding_factor(d) : 0.0f;

    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi");
    // Row i's pick from its products with the anchors, `row` (m floats), which it overwrites;
    // `near` receives up to m candidates.
    const auto choose = [&](std::size_t i, float* row, std::uint32_t* near) {
        const float x_norm = point_norms[i];
        const std::size_t barred = excluded ? (*excluded)[i] : m;
        const std::uint32_t best_j = avx2 ? fast_distances_avx2(row, anchor_norms.data(), x_norm, m, barred)
                                          : fast_distances(row, anchor_norms.data(), x_norm, m, barred);
        // Any anchor whose true distance could tie or beat best_j's is within two bounds of it.
        const float threshold = row[best_j] + factor * (2.0f * x_norm + anchor_norms[best_j] + max_anchor_norm);
        const std::size_t count = avx2 ? within_avx2(row, m, threshold, near) : within(row, m, threshold, near);
        double exact_best = std::numeric_limits<double>::infinity();
        std::uint32_t exact_j = best_j;
        for (std::size_t c = 0; c < count; ++c) {
            const double exact = squared_distance(points.row(i), anchors.row(near[c]), d);
            if (exact < exact_best) {
                exact_best = exact;
                exact_j = near[c];
            }
        }
        const std::size_t moved = assignment[i] != exact_j ? 1 : 0;
        assignment[i] = exact_j;
        distance[i] = exact_best;
        return moved;
    };

    std::size_t changed = 0;
    const std::size_t rows = std::min(block_rows(m), n);
    std::vector<float> dot(rows * m);
    for (std::size_t start = 0; start < n; start += rows) {
        const std::size_t count = std::min(rows, n - start);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(count), static_cast<int>(m),
                    static_cast<int>(d), 1.0f, points.row(start), static_cast<int>(d), anchors.data.data(),
                    static_cast<int>(d), 0.0f, dot.data(), static_cast<int>(m));
#pragma omp parallel for schedule(static) reduction(+ : changed)
        for (std::size_t r = 0; r < count; ++r) {
            thread_local std::vector<std::uint32_t> near;
            near.resize(m);
            changed += choose(start + r, dot.data() + r * m, near.data());
        }
    }
    return changed;
}

NearestRows nearest_rows(const Matrix& rows) {
    if (rows.rows < 2) {
        throw Error("nearest_rows needs at least two rows, got " + std::to_string(rows.rows));
    }
    std::vector<float> norms(rows.rows);
    for (std::size_t r = 0; r < rows.rows; ++r) {
        norms[r] = static_cast<float>(squared_norm(rows.row(r), rows.cols));
    }
    std::vector<std::uint32_t> self(rows.rows);
    std::iota(self.begin(), self.end(), std::uint32_t{0});
    NearestRows nearest;
    nearest.index.assign(rows.rows, 0);
    nearest.distance.assign(rows.rows, 0.0);
    assign_nearest(rows, norms, rows, AssignPrecision::exact, nearest.index, nearest.distance, &self);
    return nearest;
}

}  // namespace vlattice::cpu
