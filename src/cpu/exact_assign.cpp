#include "cpu/exact_assign.hpp"

#include "numeric.hpp"

#include <cblas.h>

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

    const std::size_t rows = std::min(block_rows(m), n);
    std::vector<float> dot(rows * m);
    std::size_t changed = 0;
    for (std::size_t start = 0; start < n; start += rows) {
        const std::size_t count = std::min(rows, n - start);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(count), static_cast<int>(m),
                    static_cast<int>(d), 1.0f, points.row(start), static_cast<int>(d), anchors.data.data(),
                    static_cast<int>(d), 0.0f, dot.data(), static_cast<int>(m));
#pragma omp parallel for schedule(static) reduction(+ : changed)
        for (std::size_t r = 0; r < count; ++r) {
            const std::size_t i = start + r;
            float* row_dot = dot.data() + r * m;
            if (excluded) {
                row_dot[(*excluded)[i]] = -std::numeric_limits<float>::infinity();  // its distance becomes +inf
            }
            const float x_norm = point_norms[i];
            float best = std::numeric_limits<float>::infinity();
            std::uint32_t best_j = 0;
            for (std::size_t j = 0; j < m; ++j) {
                const float dist = x_norm + anchor_norms[j] - 2.0f * row_dot[j];
                if (dist < best) {
                    best = dist;
                    best_j = static_cast<std::uint32_t>(j);
                }
            }
            // Any anchor whose true distance could tie or beat best_j's is within two bounds of it.
            const float threshold = best + factor * (2.0f * x_norm + anchor_norms[best_j] + max_anchor_norm);
            double exact_best = std::numeric_limits<double>::infinity();
            std::uint32_t exact_j = best_j;
            for (std::size_t j = 0; j < m; ++j) {
                if (x_norm + anchor_norms[j] - 2.0f * row_dot[j] <= threshold) {
                    const double exact = squared_distance(points.row(i), anchors.row(j), d);
                    if (exact < exact_best) {
                        exact_best = exact;
                        exact_j = static_cast<std::uint32_t>(j);
                    }
                }
            }
            changed += assignment[i] != exact_j ? 1 : 0;
            assignment[i] = exact_j;
            distance[i] = exact_best;
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
