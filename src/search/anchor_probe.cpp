// The probe of a search (src/search/anchor_probe.hpp).
#include "search/anchor_probe.hpp"

#include "numeric.hpp"

#include <cblas.h>

#include <algorithm>
#include <cfloat>
#include <cmath>

namespace vlattice {

namespace {

// Anchors scored at once, and anchors per tile: 64 rows of 784 floats take 200 KB, which stay in a
// core's L2 while the block's queries score them.
constexpr std::size_t kProbeRows = 4;
constexpr std::size_t kProbeTile = 64;
// Queries that score a tile together: enough that the tile, read once into cache, serves them all
// instead of each query reading every anchor from memory.
constexpr std::size_t kProbeQueries = 16;
// Inner products per GEMM: a few MiB of them per thread, whatever the anchor count.
constexpr std::size_t kGemmValues = std::size_t{1} << 20;
// Queries per block a thread probes: each block's GEMM packs the anchors once for all of them.
constexpr std::size_t kProbeBlock = 256;

// Higham's gamma_n = n u / (1 - n u), u = 2^-24: a sum of n float roundings is off by at most gamma_n
// of the sum of its terms' magnitudes, in any order (Accuracy and Stability, 3.1).
double gamma(std::size_t n) {
    const double nu = static_cast<double>(n) * (FLT_EPSILON / 2.0);
    return nu / (1.0 - nu);
}

// scores[r] <- exact_score of anchor first + r, for r < kProbeRows, the same bits: each anchor's
// lanes and tree are its own, and the anchors side by side keep the vector unit busy where one
// anchor's chain of additions left it waiting.
VLATTICE_ALSO_FOR_X86_64_V3_V4
void score_anchors(const float* query, const Matrix& anchors, std::size_t first, Metric metric, float* scores) {
    const float* rows[kProbeRows];
    for (std::size_t r = 0; r < kProbeRows; ++r) {
        rows[r] = anchors.row(first + r);
    }
    if (metric == Metric::ip) {
        ordered_lane_sums<kProbeRows>(query, rows, anchors.cols, product_term, scores);
        for (std::size_t r = 0; r < kProbeRows; ++r) {
            scores[r] = inner_product_score(scores[r]);
        }
        return;
    }
    ordered_lane_sums<kProbeRows>(query, rows, anchors.cols, squared_difference_term, scores);
}

// The k-th smallest of `values` (1 <= k <= values.size()). A probe's k is mostly small: one pass
// keeping the k smallest in order beats a selection over all of them.
double kth_smallest(const std::vector<double>& values, std::size_t k) {
    constexpr std::size_t kKept = 32;
    if (k > kKept) {
        thread_local std::vector<double> order_values;
        std::vector<double>& order = order_values;
        order.assign(values.begin(), values.end());
        std::nth_element(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k - 1), order.end());
        return order[k - 1];
    }
    double kept[kKept];
    std::size_t count = 0;
    for (const double value : values) {
        if (count == k && !(value < kept[k - 1])) {
            continue;
        }
        std::size_t at = count < k ? count++ : k - 1;
        while (at > 0 && value < kept[at - 1]) {
            kept[at] = kept[at - 1];
            --at;
        }
        kept[at] = value;
    }
    return kept[k - 1];
}

}  // namespace

AnchorProbe::AnchorProbe(const Matrix& anchors, Metric metric)
    : anchors_(anchors), metric_(metric), norms_(anchors.rows), roots_(anchors.rows) {
    for (std::size_t j = 0; j < anchors.rows; ++j) {
        norms_[j] = squared_norm(anchors.row(j), anchors.cols);
        roots_[j] = std::sqrt(norms_[j]);
    }
}

void AnchorProbe::probe(const Matrix& queries, std::size_t first, std::size_t count, std::size_t nprobe,
                        std::vector<std::vector<Scored>>& probes) const {
    probes.resize(count);
    const auto blocks = static_cast<std::ptrdiff_t>((count + kProbeBlock - 1) / kProbeBlock);
#pragma omp parallel for schedule(dynamic, 1)
    for (std::ptrdiff_t bb = 0; bb < blocks; ++bb) {
        const std::size_t from = static_cast<std::size_t>(bb) * kProbeBlock;
        probe_block(queries, first + from, std::min(kProbeBlock, count - from), nprobe, probes.data() + from);
    }
}

void AnchorProbe::probe_block(const Matrix& queries, std::size_t first, std::size_t count, std::size_t nprobe,
                              std::vector<Scored>* probes) const {
    const std::size_t m = anchors_.rows;
    const std::size_t d = anchors_.cols;
    if (nprobe >= m || d == 0) {
        for (std::size_t i = 0; i < count; i += kProbeQueries) {
            score_all(queries, first + i, std::min(kProbeQueries, count - i), nprobe, probes + i);
        }
        return;
    }
    const std::size_t rows = std::clamp<std::size_t>(kGemmValues / m, 1, count);
    thread_local std::vector<float> dots;
    dots.resize(rows * m);
    for (std::size_t i = 0; i < count; i += rows) {
        const std::size_t block = std::min(rows, count - i);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(block), static_cast<int>(m),
                    static_cast<int>(d), 1.0f, queries.row(first + i), static_cast<int>(d), anchors_.data.data(),
                    static_cast<int>(d), 0.0f, dots.data(), static_cast<int>(m));
        for (std::size_t r = 0; r < block; ++r) {
            from_bounds(queries.row(first + i + r), dots.data() + r * m, nprobe, probes[i + r]);
        }
    }
}

void AnchorProbe::score_all(const Matrix& queries, std::size_t first, std::size_t count, std::size_t nprobe,
                            std::vector<Scored>* probes) const {
    const std::size_t m = anchors_.rows;
    for (std::size_t i = 0; i < count; ++i) {
        probes[i].resize(m);
    }
    float scores[kProbeRows];
    for (std::size_t tile = 0; tile < m; tile += kProbeTile) {
        const std::size_t end = std::min(m, tile + kProbeTile);
        for (std::size_t i = 0; i < count; ++i) {
            const float* query = queries.row(first + i);
            std::vector<Scored>& scored = probes[i];
            std::size_t j = tile;
            for (; j + kProbeRows <= end; j += kProbeRows) {
                score_anchors(query, anchors_, j, metric_, scores);
                for (std::size_t r = 0; r < kProbeRows; ++r) {
                    scored[j + r] = {scores[r], static_cast<std::uint32_t>(j + r)};
                }
            }
            for (; j < end; ++j) {
                scored[j] = {exact_score(query, anchors_.row(j), anchors_.cols, metric_),
                             static_cast<std::uint32_t>(j)};
            }
        }
    }
    for (std::size_t i = 0; i < count; ++i) {
        keep_smallest(probes[i], nprobe);
    }
}

// For the exact score S of anchor c and its estimate from the GEMM's dot, the true value D (the
// squared distance ||q||^2 + ||c||^2 - 2 q.c, or -q.c for ip) lies within eps_D of the estimate, and
// S within gamma_{d+4} D (l2: a rounded difference, its square and d - 1 additions per term) or
// within gamma_d ||q|| ||c|| (ip) of D; `slack` covers underflow to subnormals or to zero. So
// L = estimate - E <= S <= estimate + E = U. At least nprobe anchors have S <= T, the nprobe-th
// smallest U, so an anchor whose L exceeds T is not among the best; the others are scored exactly.
// Scores that could overflow float take the exact path for every anchor (+infinity and NaN order
// as the contract says, which no bound describes).
void AnchorProbe::from_bounds(const float* query, const float* dots, std::size_t nprobe,
                              std::vector<Scored>& scored) const {
    const std::size_t m = anchors_.rows;
    const std::size_t d = anchors_.cols;
    const bool ip = metric_ == Metric::ip;
    const double query_norm = squared_norm(query, d);
    const double query_root = std::sqrt(query_norm);
    const double underflow = static_cast<double>(d) * FLT_MIN;
    const double dot_error = gamma(d);
    const double score_error = gamma(d + 4);
    thread_local std::vector<double> lower_values;
    thread_local std::vector<double> upper_values;
    std::vector<double>& lower = lower_values;
    std::vector<double>& upper = upper_values;
    lower.resize(m);
    upper.resize(m);
    // Past these the float scores could overflow (l2: an upper bound at half of FLT_MAX; ip: an
    // inner product's magnitude at a quarter); NaN fails both comparisons.
    bool bounded = query_root < FLT_MAX;
    for (std::size_t j = 0; j < m; ++j) {
        const double dot = dots[j];
        const double magnitude = query_root * roots_[j];
        const double slack = underflow * (1.0 + query_root + roots_[j]);
        const double dot_bound = dot_error * magnitude + slack;
        double estimate = 0.0;
        double bound = 0.0;
        if (ip) {
            estimate = -dot;
            bound = 2.0 * dot_bound + 1e-12 * std::abs(dot);
            bounded = bounded && magnitude < 0.25 * FLT_MAX;
        } else {
            estimate = query_norm + norms_[j] - 2.0 * dot;
            const double estimate_bound = 2.0 * dot_bound + 1e-12 * (query_norm + norms_[j] + 2.0 * std::abs(dot));
            bound = estimate_bound + score_error * (std::max(estimate, 0.0) + estimate_bound) + slack;
        }
        lower[j] = estimate - bound;
        upper[j] = estimate + bound;
        bounded = bounded && upper[j] < 0.5 * FLT_MAX && lower[j] > -0.5 * FLT_MAX;
    }
    scored.clear();
    if (!bounded) {
        for (std::size_t j = 0; j < m; ++j) {
            scored.push_back({exact_score(query, anchors_.row(j), d, metric_), static_cast<std::uint32_t>(j)});
        }
        keep_smallest(scored, nprobe);
        return;
    }
    const double threshold = kth_smallest(upper, nprobe);
    for (std::size_t j = 0; j < m; ++j) {
        if (lower[j] <= threshold) {
            scored.push_back({exact_score(query, anchors_.row(j), d, metric_), static_cast<std::uint32_t>(j)});
        }
    }
    keep_smallest(scored, nprobe);
}

}  // namespace vlattice
