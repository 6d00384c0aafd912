#include "cpu/exact_assign.hpp"

#include "cpu/direct_distances.hpp"
#include "cpu/distance_scan.hpp"

#include "numeric.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>
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

// Relative slack on the bounds' comparisons, far above the rounding of the double sums and roots.
constexpr double kBoundSlack = 1e-9;

std::vector<std::uint32_t> all_rows(std::size_t n) {
    std::vector<std::uint32_t> rows(n);
    std::iota(rows.begin(), rows.end(), std::uint32_t{0});
    return rows;
}

// The points whose last anchor is still their nearest by the bounds keep it, with their distance to
// it now, and their bound lowered by the moves; returns the others, in order, for a scan. The bound
// is lowered by the farthest move, and a few anchors move much farther than the rest (those with
// few members, while the fit is hot): the m / 64 that moved farthest, and the replaced ones, which
// have no move to bound, are measured against each point instead, unless they are so many that
// everything is scanned.
std::vector<std::uint32_t> keep_bounded(const Matrix& points, const Matrix& anchors, AssignBounds& bounds,
                                        const std::vector<std::uint32_t>& assignment, std::vector<double>& distance) {
    const std::size_t n = points.rows;
    const std::size_t m = anchors.rows;
    const std::size_t d = points.cols;
    const std::vector<double>& moved = *bounds.moved;
    std::vector<double>& others = *bounds.others;
    std::size_t replaced = 0;
    for (std::size_t j = 0; j < m; ++j) {
        replaced += std::isfinite(moved[j]) ? 0 : 1;
    }
    if (replaced > m / 8) {
        return all_rows(n);
    }
    // The anchors measured first, by move, farthest first (+inf before all; moves are never NaN).
    const std::size_t count = std::min(m, std::max(m / 64 + 1, replaced));
    std::vector<std::uint32_t> by_move(m);
    std::iota(by_move.begin(), by_move.end(), std::uint32_t{0});
    const auto farther = [&](std::uint32_t a, std::uint32_t b) { return moved[a] > moved[b]; };
    std::partial_sort(by_move.begin(), by_move.begin() + static_cast<std::ptrdiff_t>(count), by_move.end(), farther);
    const std::vector<std::uint32_t> measured(by_move.begin(), by_move.begin() + static_cast<std::ptrdiff_t>(count));
    double farthest = 0.0;
    for (std::size_t k = measured.size(); k < m; ++k) {
        farthest = std::max(farthest, moved[by_move[k]]);
    }
    std::vector<unsigned char> scan(n, 1);
#pragma omp parallel for schedule(static)
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint32_t a = assignment[i];
        if (a >= m || !std::isfinite(moved[a]) || !(others[i] > 0.0)) {
            continue;
        }
        const double own = (std::sqrt(distance[i]) + moved[a]) * (1.0 + kBoundSlack);
        double lower = others[i] - farthest;
        if (!(own < lower)) {
            continue;
        }
        for (const std::uint32_t r : measured) {
            if (r == a) {
                continue;
            }
            lower = std::min(lower, std::sqrt(squared_distance(points.row(i), anchors.row(r), d)));
            if (!(own < lower)) {
                break;
            }
        }
        if (own < lower) {
            scan[i] = 0;
            distance[i] = squared_distance(points.row(i), anchors.row(a), d);
            others[i] = lower * (1.0 - kBoundSlack);
        }
    }
    std::vector<std::uint32_t> rows;
    for (std::size_t i = 0; i < n; ++i) {
        if (scan[i] != 0) {
            rows.push_back(static_cast<std::uint32_t>(i));
        }
    }
    return rows;
}

}  // namespace

std::size_t assign_nearest(const Matrix& points, const std::vector<float>& point_norms, const Matrix& anchors,
                           AssignPrecision precision, std::vector<std::uint32_t>& assignment,
                           std::vector<double>& distance, const std::vector<std::uint32_t>* excluded,
                           AssignBounds* bounds) {
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

    const bool keeps_bounds = bounds != nullptr && precision == AssignPrecision::exact && excluded == nullptr &&
                              d <= kDirectDims;
    // Row i's pick from its fast distances to the anchors, `row` (m floats); `near` receives up to m
    // candidates.
    const auto choose = [&](std::size_t i, float* row, std::uint32_t* near) {
        const float x_norm = point_norms[i];
        if (excluded && (*excluded)[i] < m) {
            row[(*excluded)[i]] = std::numeric_limits<float>::infinity();
        }
        const std::uint32_t best_j = first_least(row, m);
        // Any anchor whose true distance could tie or beat best_j's is within two bounds of it.
        const float threshold = row[best_j] + factor * (2.0f * x_norm + anchor_norms[best_j] + max_anchor_norm);
        const std::size_t count = within(row, m, threshold, near);
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
        if (keeps_bounds) {
            // Every other anchor's fast distance is at least the least of theirs, and its true one at
            // most a bound below that.
            const float own = row[exact_j];
            row[exact_j] = std::numeric_limits<float>::infinity();
            const double least = static_cast<double>(least_value(row, m)) -
                                 static_cast<double>(factor) * (static_cast<double>(x_norm) + max_anchor_norm);
            row[exact_j] = own;
            (*bounds->others)[i] = least > 0.0 ? std::sqrt(least) * (1.0 - kBoundSlack) : 0.0;
        }
        return moved;
    };

    std::size_t changed = 0;
    if (d <= kDirectDims) {
        const std::vector<std::uint32_t> scanned =
            keeps_bounds ? keep_bounded(points, anchors, *bounds, assignment, distance) : all_rows(n);
        const std::size_t count = scanned.size();
        const std::vector<float> columns = anchor_columns(anchors);
#pragma omp parallel for schedule(static) reduction(+ : changed)
        for (std::size_t pair = 0; pair < (count + 1) / 2; ++pair) {
            thread_local std::vector<float> rows;
            thread_local std::vector<std::uint32_t> near;
            rows.resize(2 * m);
            near.resize(m);
            const std::size_t i[2] = {scanned[2 * pair], scanned[std::min(2 * pair + 1, count - 1)]};
            const float* x[2] = {points.row(i[0]), points.row(i[1])};
            const float x_norm[2] = {point_norms[i[0]], point_norms[i[1]]};
            float* const row[2] = {rows.data(), rows.data() + m};
            direct_distances(x, x_norm, columns.data(), anchor_norms.data(), d, m, row);
            changed += choose(i[0], row[0], near.data());
            if (i[1] != i[0]) {
                changed += choose(i[1], row[1], near.data());
            }
        }
        return changed;
    }
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
            float* row = dot.data() + r * m;
            to_distances(row, anchor_norms.data(), point_norms[start + r], m);
            changed += choose(start + r, row, near.data());
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
