#include "cpu/robust_reduce.hpp"

#include <algorithm>
#include <cmath>

namespace vlattice::cpu {

namespace {

// Members of each anchor, contiguous and in point order: order[offset[j] .. offset[j + 1]).
void group_by_anchor(const std::vector<std::uint32_t>& assignment, std::size_t m,
                     std::vector<std::uint32_t>& count, std::vector<std::size_t>& offset,
                     std::vector<std::uint32_t>& order) {
    count.assign(m, 0);
    for (std::uint32_t a : assignment) {
        ++count[a];
    }
    offset.assign(m + 1, 0);
    for (std::size_t j = 0; j < m; ++j) {
        offset[j + 1] = offset[j] + count[j];
    }
    std::vector<std::size_t> cursor(offset.begin(), offset.end() - 1);
    order.resize(assignment.size());
    for (std::size_t i = 0; i < assignment.size(); ++i) {
        order[cursor[assignment[i]]++] = static_cast<std::uint32_t>(i);
    }
}

}  // namespace

void robust_reduce(const PointView& points, const std::vector<std::uint32_t>& assignment,
                   const std::vector<double>& distance, const Matrix& anchors, double trim,
                   std::vector<double>& means, AnchorStats& stats) {
    const std::size_t m = anchors.rows;
    const std::size_t d = points.cols;
    std::vector<std::size_t> offset;
    std::vector<std::uint32_t> order;
    group_by_anchor(assignment, m, stats.count, offset, order);
    stats.kept.assign(m, 0);
    stats.variance.assign(m, 0.0);
    means.resize(m * d);

#pragma omp parallel for schedule(dynamic, 4)
    for (std::size_t j = 0; j < m; ++j) {
        const std::size_t count = stats.count[j];
        if (count == 0) {
            continue;
        }
        std::uint32_t* members = order.data() + offset[j];
        const std::size_t keep = count - static_cast<std::size_t>(std::floor(trim * static_cast<double>(count)));
        if (keep < count) {
            // Ties in distance go by point index, so the kept set is the same on every backend.
            std::nth_element(members, members + keep, members + count, [&](std::uint32_t a, std::uint32_t b) {
                return distance[a] < distance[b] || (distance[a] == distance[b] && a < b);
            });
        }
        double* mean = means.data() + j * d;
        std::fill(mean, mean + d, 0.0);
        double kept_distance = 0.0;
        thread_local std::vector<float> scratch;
        scratch.resize(d);
        for (std::size_t r = 0; r < keep; ++r) {
            const float* x = points.row(members[r], scratch.data());
            for (std::size_t k = 0; k < d; ++k) {
                mean[k] += x[k];
            }
            kept_distance += distance[members[r]];
        }
        double shift = 0.0;  // ||mean - anchor||^2
        const float* anchor = anchors.row(j);
        for (std::size_t k = 0; k < d; ++k) {
            mean[k] /= static_cast<double>(keep);
            shift += (mean[k] - anchor[k]) * (mean[k] - anchor[k]);
        }
        stats.kept[j] = static_cast<std::uint32_t>(keep);
        // Parallel-axis theorem: spread about the mean = spread about the anchor - the mean's offset.
        stats.variance[j] = std::max(0.0, kept_distance / static_cast<double>(keep) - shift);
    }
}

}  // namespace vlattice::cpu
