#include "cpu/direct_distances.hpp"

#include <immintrin.h>

namespace vlattice::cpu {

namespace {

float distance(const float* x, float x_norm, const float* columns, float norm, std::size_t d, std::size_t m,
               std::size_t j) {
    float dot = 0.0f;
    for (std::size_t t = 0; t < d; ++t) {
        dot = dot + x[t] * columns[t * m + j];
    }
    return x_norm + norm - 2.0f * dot;
}

// x_norm + norms - 2 dot, eight anchors from j.
__attribute__((target("avx2"))) void store_distances(float* row, const float* norms, __m256 point_norm, __m256 dot,
                                                      std::size_t j) {
    const __m256 both = _mm256_add_ps(point_norm, _mm256_loadu_ps(norms + j));
    _mm256_storeu_ps(row + j, _mm256_sub_ps(both, _mm256_mul_ps(_mm256_set1_ps(2.0f), dot)));
}

// Two points against 32 anchors at a time, their products held in eight registers across the
// dimensions, so each anchor column is read once for both and each distance written once; the
// operations are the scalar loop's, lane by lane.
__attribute__((target("avx2"))) void direct_distances_avx2(const float* const x[2], const float x_norm[2],
                                                            const float* columns, const float* norms, std::size_t d,
                                                            std::size_t m, float* const row[2]) {
    const __m256 point_norm[2] = {_mm256_set1_ps(x_norm[0]), _mm256_set1_ps(x_norm[1])};
    std::size_t j = 0;
    for (; j + 32 <= m; j += 32) {
        __m256 dot[2][4];
        for (auto& point : dot) {
            for (__m256& part : point) {
                part = _mm256_setzero_ps();
            }
        }
        for (std::size_t t = 0; t < d; ++t) {
            const float* column = columns + t * m + j;
            const __m256 anchor[4] = {_mm256_loadu_ps(column), _mm256_loadu_ps(column + 8),
                                      _mm256_loadu_ps(column + 16), _mm256_loadu_ps(column + 24)};
            for (int p = 0; p < 2; ++p) {
                const __m256 value = _mm256_set1_ps(x[p][t]);
                for (int k = 0; k < 4; ++k) {
                    dot[p][k] = _mm256_add_ps(dot[p][k], _mm256_mul_ps(value, anchor[k]));
                }
            }
        }
        for (int p = 0; p < 2; ++p) {
            for (int k = 0; k < 4; ++k) {
                store_distances(row[p], norms, point_norm[p], dot[p][k], j + 8 * static_cast<std::size_t>(k));
            }
        }
    }
    for (; j + 8 <= m; j += 8) {
        for (int p = 0; p < 2; ++p) {
            __m256 dot = _mm256_setzero_ps();
            for (std::size_t t = 0; t < d; ++t) {
                dot = _mm256_add_ps(dot, _mm256_mul_ps(_mm256_set1_ps(x[p][t]), _mm256_loadu_ps(columns + t * m + j)));
            }
            store_distances(row[p], norms, point_norm[p], dot, j);
        }
    }
    for (; j < m; ++j) {
        for (int p = 0; p < 2; ++p) {
            row[p][j] = distance(x[p], x_norm[p], columns, norms[j], d, m, j);
        }
    }
}

}  // namespace

std::vector<float> anchor_columns(const Matrix& anchors) {
    const std::size_t m = anchors.rows;
    const std::size_t d = anchors.cols;
    std::vector<float> columns(d * m);
    for (std::size_t j = 0; j < m; ++j) {
        for (std::size_t t = 0; t < d; ++t) {
            columns[t * m + j] = anchors.row(j)[t];
        }
    }
    return columns;
}

void direct_distances(const float* const x[2], const float x_norm[2], const float* columns, const float* norms,
                      std::size_t d, std::size_t m, float* const row[2]) {
    if (__builtin_cpu_supports("avx2")) {
        direct_distances_avx2(x, x_norm, columns, norms, d, m, row);
        return;
    }
    for (int p = 0; p < 2; ++p) {
        for (std::size_t j = 0; j < m; ++j) {
            row[p][j] = distance(x[p], x_norm[p], columns, norms[j], d, m, j);
        }
    }
}

}  // namespace vlattice::cpu
