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
std::vector<std::uint32_t> keep_bounded(const PointView& points, const Matrix& anchors, AssignBounds& bounds,
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
        thread_local std::vector<float> scratch;
        scratch.resize(d);
        const float* x = points.row(i, scratch.data());
        const double own = (std::sqrt(distance[i]) + moved[a]) * (1.0 + kBoundSlack);
        double lower = others[i] - farthest;
        if (!(own < lower)) {
            continue;
        }
        for (const std::uint32_t r : measured) {
            if (r == a) {
                continue;
            }
            lower = std::min(lower, std::sqrt(squared_distance(x, anchors.row(r), d)));
            if (!(own < lower)) {
                break;
            }
        }
        if (own < lower) {
            scan[i] = 0;
            distance[i] = squared_distance(x, anchors.row(a), d);
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

// How far around each anchor its neighbourhood reaches, in multiples of its farthest scanned
// member's distance r: every anchor farther than 2 r from it is farther from each of its members than
// their own anchor. Wider reaches tighten the points' bounds but gather more anchors: at 4,096
// centroids over 6 coordinates, 3 r took 50 % longer per assign than 2 r.
constexpr double kReach = 2.0;
// A neighbourhood of more than this share of the anchors is not worth its gather: its points are
// scanned against every anchor.
constexpr std::size_t kDenseShare = 4;
constexpr double kNoLimit = std::numeric_limits<double>::infinity();

// The scanned points (bounds kept, at most kDirectDims dimensions) whose last anchor a is valid are
// assigned from a's neighbourhood instead of every anchor. With r >= ||x - c_a||, an anchor j with
// ||c_a - c_j|| > 2 r is farther from x than r (triangle inequality), so the nearest anchor and every
// anchor tying with it lie within 2 r of c_a. Each anchor with scanned members gathers, by one fast
// scan of the anchors from it, those that may lie within kReach times its farthest member's r
// (within the fast distances' rounding bound), in increasing id; its members take their fast
// distances to those alone and choose as a scan does: the same candidates, the same double scores,
// the same anchor. An anchor left out lies farther than reach - r from the point, which caps its
// bound. At sub-space fits' shapes (4,096 centroids over a few coordinates) a neighbourhood holds a
// few percent of the anchors. Returns the points left to a scan of every anchor.
template <class Choose>
std::vector<std::uint32_t> settle_by_neighbours(const PointView& points, const std::vector<float>& point_norms,
                                                const Matrix& anchors, const std::vector<float>& columns,
                                                const std::vector<float>& anchor_norms, float max_anchor_norm,
                                                float factor, const std::vector<std::uint32_t>& scanned,
                                                const std::vector<std::uint32_t>& assignment, Choose& choose,
                                                std::size_t& changed) {
    const std::size_t m = anchors.rows;
    const std::size_t d = anchors.cols;
    const std::size_t count = scanned.size();
    // Each scanned point's r, and the points grouped by anchor (in scan order within a group).
    std::vector<double> radius(count, -1.0);
#pragma omp parallel for schedule(static)
    for (std::size_t t = 0; t < count; ++t) {
        const std::uint32_t a = assignment[scanned[t]];
        if (a < m) {
            thread_local std::vector<float> scratch;
            scratch.resize(d);
            radius[t] = std::sqrt(squared_distance(points.row(scanned[t], scratch.data()), anchors.row(a), d)) *
                        (1.0 + kBoundSlack);
        }
    }
    std::vector<std::size_t> start(m + 1, 0);
    std::vector<double> farthest(m, 0.0);
    for (std::size_t t = 0; t < count; ++t) {
        if (radius[t] >= 0.0) {
            const std::uint32_t a = assignment[scanned[t]];
            ++start[a + 1];
            farthest[a] = std::max(farthest[a], radius[t]);
        }
    }
    std::vector<std::uint32_t> hubs;
    for (std::size_t a = 0; a < m; ++a) {
        if (start[a + 1] > 0) {
            hubs.push_back(static_cast<std::uint32_t>(a));
        }
        start[a + 1] += start[a];
    }
    std::vector<std::uint32_t> members(start[m]);
    {
        std::vector<std::size_t> next(start.begin(), start.end() - 1);
        for (std::size_t t = 0; t < count; ++t) {
            if (radius[t] >= 0.0) {
                members[next[assignment[scanned[t]]]++] = static_cast<std::uint32_t>(t);
            }
        }
    }
    std::vector<unsigned char> settled(count, 0);
    std::size_t moved = 0;
#pragma omp parallel for schedule(dynamic, 8) reduction(+ : moved)
    for (std::size_t pair = 0; pair < (hubs.size() + 1) / 2; ++pair) {
        thread_local std::vector<float> rows;
        thread_local std::vector<std::uint32_t> near;
        thread_local std::vector<std::uint32_t> hood;
        thread_local std::vector<float> hood_columns;
        thread_local std::vector<float> hood_norms;
        thread_local std::vector<float> member_rows;
        thread_local std::vector<float> scratch;
        rows.resize(2 * m);
        scratch.resize(2 * d);
        near.resize(m);
        const std::uint32_t hub[2] = {hubs[2 * pair], hubs[std::min(2 * pair + 1, hubs.size() - 1)]};
        {
            const float* x[2] = {anchors.row(hub[0]), anchors.row(hub[1])};
            const float x_norm[2] = {anchor_norms[hub[0]], anchor_norms[hub[1]]};
            float* const row[2] = {rows.data(), rows.data() + m};
            direct_distances(x, x_norm, columns.data(), anchor_norms.data(), d, m, row);
        }
        for (int h = 0; h < (hub[1] != hub[0] ? 2 : 1); ++h) {
            const std::uint32_t a = hub[h];
            const float* from = rows.data() + static_cast<std::size_t>(h) * m;
            const double reach = kReach * farthest[a];
            // A fast distance from c_a is within factor (||c_a||^2 + ||c_j||^2) of the true one.
            const double limit =
                reach * reach + static_cast<double>(factor) * (static_cast<double>(anchor_norms[a]) + max_anchor_norm);
            // The least float at or above the limit, so that rounding it admits no fewer anchors; a
            // itself is among them unless its own fast distance rounded past the limit.
            const float bound = std::nextafter(static_cast<float>(limit), std::numeric_limits<float>::infinity());
            hood.resize(m);
            std::size_t k = within(from, m, bound, hood.data());
            if (!std::binary_search(hood.begin(), hood.begin() + static_cast<std::ptrdiff_t>(k), a)) {
                hood.insert(std::upper_bound(hood.begin(), hood.begin() + static_cast<std::ptrdiff_t>(k), a), a);
                ++k;
            }
            if (k * kDenseShare > m) {
                continue;
            }
            hood_columns.resize(d * k);
            hood_norms.resize(k);
            member_rows.resize(2 * k);
            for (std::size_t l = 0; l < k; ++l) {
                for (std::size_t t = 0; t < d; ++t) {
                    hood_columns[t * k + l] = anchors.row(hood[l])[t];
                }
                hood_norms[l] = anchor_norms[hood[l]];
            }
            const std::size_t first = start[a];
            const std::size_t size = start[a + 1] - first;
            for (std::size_t q = 0; q < size; q += 2) {
                const std::size_t t[2] = {members[first + q], members[first + std::min(q + 1, size - 1)]};
                const std::size_t i[2] = {scanned[t[0]], scanned[t[1]]};
                const float* x[2] = {points.row(i[0], scratch.data()), points.row(i[1], scratch.data() + d)};
                const float x_norm[2] = {point_norms[i[0]], point_norms[i[1]]};
                float* const row[2] = {member_rows.data(), member_rows.data() + k};
                direct_distances(x, x_norm, hood_columns.data(), hood_norms.data(), d, k, row);
                for (int p = 0; p < (t[1] != t[0] ? 2 : 1); ++p) {
                    moved += choose(i[p], row[p], k, hood_norms.data(), hood.data(), reach - radius[t[p]], near.data());
                    settled[t[p]] = 1;
                }
            }
        }
    }
    changed += moved;
    std::vector<std::uint32_t> rest;
    for (std::size_t t = 0; t < count; ++t) {
        if (settled[t] == 0) {
            rest.push_back(scanned[t]);
        }
    }
    return rest;
}

}  // namespace

std::size_t assign_nearest(const PointView& points, const std::vector<float>& point_norms, const Matrix& anchors,
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
    // Row i's pick from its fast distances `row` to k anchors: anchor ids[l] (l itself without ids), in
    // increasing id, with float norms norms[l]; `near` receives up to k candidates. Every anchor the
    // row leaves out lies farther from the point than `beyond` (+inf when the row holds them all).
    const auto choose = [&](std::size_t i, float* row, std::size_t k, const float* norms, const std::uint32_t* ids,
                            double beyond, std::uint32_t* near) {
        const auto id = [&](std::uint32_t l) { return ids != nullptr ? ids[l] : l; };
        const float x_norm = point_norms[i];
        if (excluded && (*excluded)[i] < m) {
            row[(*excluded)[i]] = std::numeric_limits<float>::infinity();
        }
        const std::uint32_t best_l = first_least(row, k);
        // Any anchor whose true distance could tie or beat best_l's is within two bounds of it.
        const float threshold = row[best_l] + factor * (2.0f * x_norm + norms[best_l] + max_anchor_norm);
        const std::size_t count = within(row, k, threshold, near);
        double exact_best = std::numeric_limits<double>::infinity();
        std::uint32_t exact_l = best_l;
        thread_local std::vector<float> scratch;
        scratch.resize(d);
        const float* x = points.row(i, scratch.data());
        for (std::size_t c = 0; c < count; ++c) {
            const double exact = squared_distance(x, anchors.row(id(near[c])), d);
            if (exact < exact_best) {
                exact_best = exact;
                exact_l = near[c];
            }
        }
        const std::uint32_t exact_j = id(exact_l);
        const std::size_t moved = assignment[i] != exact_j ? 1 : 0;
        assignment[i] = exact_j;
        distance[i] = exact_best;
        if (keeps_bounds) {
            // Every other anchor's fast distance is at least the least of theirs, and its true one at
            // most a bound below that.
            const float own = row[exact_l];
            row[exact_l] = std::numeric_limits<float>::infinity();
            const double least = static_cast<double>(least_value(row, k)) -
                                 static_cast<double>(factor) * (static_cast<double>(x_norm) + max_anchor_norm);
            row[exact_l] = own;
            const double lower = std::min(least > 0.0 ? std::sqrt(least) : 0.0, beyond);
            (*bounds->others)[i] = lower > 0.0 ? lower * (1.0 - kBoundSlack) : 0.0;
        }
        return moved;
    };

    std::size_t changed = 0;
    if (d <= kDirectDims) {
        const std::vector<float> columns = anchor_columns(anchors);
        std::vector<std::uint32_t> scanned =
            keeps_bounds ? keep_bounded(points, anchors, *bounds, assignment, distance) : all_rows(n);
        if (keeps_bounds) {
            scanned = settle_by_neighbours(points, point_norms, anchors, columns, anchor_norms, max_anchor_norm, factor,
                                           scanned, assignment, choose, changed);
        }
        const std::size_t count = scanned.size();
#pragma omp parallel for schedule(static) reduction(+ : changed)
        for (std::size_t pair = 0; pair < (count + 1) / 2; ++pair) {
            thread_local std::vector<float> rows;
            thread_local std::vector<std::uint32_t> near;
            thread_local std::vector<float> scratch;
            rows.resize(2 * m);
            near.resize(m);
            scratch.resize(2 * d);
            const std::size_t i[2] = {scanned[2 * pair], scanned[std::min(2 * pair + 1, count - 1)]};
            const float* x[2] = {points.row(i[0], scratch.data()), points.row(i[1], scratch.data() + d)};
            const float x_norm[2] = {point_norms[i[0]], point_norms[i[1]]};
            float* const row[2] = {rows.data(), rows.data() + m};
            direct_distances(x, x_norm, columns.data(), anchor_norms.data(), d, m, row);
            changed += choose(i[0], row[0], m, anchor_norms.data(), nullptr, kNoLimit, near.data());
            if (i[1] != i[0]) {
                changed += choose(i[1], row[1], m, anchor_norms.data(), nullptr, kNoLimit, near.data());
            }
        }
        return changed;
    }
    const std::size_t rows = std::min(block_rows(m), n);
    std::vector<float> dot(rows * m);
    std::vector<float> widened;  // a block of points stored in another type than float32
    for (std::size_t start = 0; start < n; start += rows) {
        const std::size_t count = std::min(rows, n - start);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(count), static_cast<int>(m),
                    static_cast<int>(d), 1.0f, points.block(start, count, widened), static_cast<int>(d), anchors.data.data(),
                    static_cast<int>(d), 0.0f, dot.data(), static_cast<int>(m));
#pragma omp parallel for schedule(static) reduction(+ : changed)
        for (std::size_t r = 0; r < count; ++r) {
            thread_local std::vector<std::uint32_t> near;
            near.resize(m);
            float* row = dot.data() + r * m;
            to_distances(row, anchor_norms.data(), point_norms[start + r], m);
            changed += choose(start + r, row, m, anchor_norms.data(), nullptr, kNoLimit, near.data());
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
