#include "cpu/distance_scan.hpp"

#include <immintrin.h>

#include <limits>

namespace vlattice::cpu {

namespace {

// Per point these compare m values where the products took d m multiply-adds, so at small d
// (sub-space fits of a product code) they are much of the assign's cost: hence the AVX2 copies, since
// the compiler leaves the plain loops' running minimum and search scalar.

void to_distances_plain(float* row, const float* anchor_norms, float x_norm, std::size_t m) {
    for (std::size_t j = 0; j < m; ++j) {
        row[j] = x_norm + anchor_norms[j] - 2.0f * row[j];
    }
}

__attribute__((target("avx2"))) void to_distances_avx2(float* row, const float* anchor_norms, float x_norm,
                                                        std::size_t m) {
    const __m256 norm = _mm256_set1_ps(x_norm);
    const __m256 two = _mm256_set1_ps(2.0f);
    std::size_t j = 0;
    for (; j + 8 <= m; j += 8) {
        const __m256 distance = _mm256_sub_ps(_mm256_add_ps(norm, _mm256_loadu_ps(anchor_norms + j)),
                                              _mm256_mul_ps(two, _mm256_loadu_ps(row + j)));
        _mm256_storeu_ps(row + j, distance);
    }
    to_distances_plain(row + j, anchor_norms + j, x_norm, m - j);
}

std::uint32_t first_least_plain(const float* row, std::size_t m) {
    float best = std::numeric_limits<float>::infinity();
    std::uint32_t best_j = 0;
    for (std::size_t j = 0; j < m; ++j) {
        if (row[j] < best) {
            best = row[j];
            best_j = static_cast<std::uint32_t>(j);
        }
    }
    return best_j;
}

__attribute__((target("avx2"))) float least_value_avx2(const float* row, std::size_t m) {
    // Four running minima, so that each min waits on the one four loads back, not the last.
    const __m256 infinity = _mm256_set1_ps(std::numeric_limits<float>::infinity());
    __m256 part[4] = {infinity, infinity, infinity, infinity};
    std::size_t j = 0;
    for (; j + 32 <= m; j += 32) {
        for (int k = 0; k < 4; ++k) {
            part[k] = _mm256_min_ps(_mm256_loadu_ps(row + j + 8 * k), part[k]);  // a NaN in row keeps part[k]
        }
    }
    for (; j + 8 <= m; j += 8) {
        part[0] = _mm256_min_ps(_mm256_loadu_ps(row + j), part[0]);
    }
    const __m256 least = _mm256_min_ps(_mm256_min_ps(part[0], part[1]), _mm256_min_ps(part[2], part[3]));
    float lanes[8];
    _mm256_storeu_ps(lanes, least);
    float best = lanes[0];
    for (int l = 1; l < 8; ++l) {
        best = lanes[l] < best ? lanes[l] : best;
    }
    for (; j < m; ++j) {
        best = row[j] < best ? row[j] : best;
    }
    return best;
}

__attribute__((target("avx2,bmi"))) std::uint32_t first_least_avx2(const float* row, std::size_t m) {
    const float best = least_value_avx2(row, m);
    if (!(best < std::numeric_limits<float>::infinity())) {
        return 0;
    }
    std::size_t j = 0;
    const __m256 wanted = _mm256_set1_ps(best);
    for (; j + 8 <= m; j += 8) {
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

std::size_t within_plain(const float* row, std::size_t m, float threshold, std::uint32_t* out) {
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
    // Candidates are few: 32 values are compared before one branch asks whether any was in bound.
    for (; j + 32 <= m; j += 32) {
        __m256 in_bound[4];
        for (int k = 0; k < 4; ++k) {
            in_bound[k] = _mm256_cmp_ps(_mm256_loadu_ps(row + j + 8 * k), bound, _CMP_LE_OQ);
        }
        const __m256 any = _mm256_or_ps(_mm256_or_ps(in_bound[0], in_bound[1]), _mm256_or_ps(in_bound[2], in_bound[3]));
        if (_mm256_testz_ps(any, any) != 0) {
            continue;
        }
        for (int k = 0; k < 4; ++k) {
            unsigned hits = static_cast<unsigned>(_mm256_movemask_ps(in_bound[k]));
            while (hits != 0) {
                out[count++] = static_cast<std::uint32_t>(j + 8 * static_cast<std::size_t>(k) + _tzcnt_u32(hits));
                hits &= hits - 1;
            }
        }
    }
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

bool has_avx2() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi"); }

}  // namespace

// Worst-case error of the float32 distance ||x||^2 + ||c||^2 - 2 fl(x.c), relative to ||x||^2 + ||c||^2:
// the dot product of length d is off by at most d*u*||x||*||c|| <= d*u*(||x||^2 + ||c||^2)/2 for any
// summation order (Higham, Accuracy and Stability, 3.1), and the rounded norms and the two additions
// add a few more units of u. (d + 8) u covers all of it.
float rounding_factor(std::size_t d) {
    return static_cast<float>(d + 8) * std::numeric_limits<float>::epsilon() * 0.5f;
}

void to_distances(float* row, const float* anchor_norms, float x_norm, std::size_t m) {
    if (has_avx2()) {
        to_distances_avx2(row, anchor_norms, x_norm, m);
    } else {
        to_distances_plain(row, anchor_norms, x_norm, m);
    }
}

std::uint32_t first_least(const float* row, std::size_t m) {
    return has_avx2() ? first_least_avx2(row, m) : first_least_plain(row, m);
}

float least_value(const float* row, std::size_t m) {
    if (has_avx2()) {
        return least_value_avx2(row, m);
    }
    float best = std::numeric_limits<float>::infinity();
    for (std::size_t j = 0; j < m; ++j) {
        best = row[j] < best ? row[j] : best;
    }
    return best;
}

std::size_t within(const float* row, std::size_t m, float threshold, std::uint32_t* out) {
    return has_avx2() ? within_avx2(row, m, threshold, out) : within_plain(row, m, threshold, out);
}

}  // namespace vlattice::cpu
