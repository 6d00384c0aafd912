#include "cpu/robust_reduce.hpp"

#include "cpu/kept_members.hpp"
#include "fit/exact_sums.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>

namespace vlattice::cpu {

namespace {

// This rank's members of each anchor, contiguous and in row order; count[j] is how many.
LocalMembers group_by_anchor(const std::vector<std::uint32_t>& assignment, std::size_t m,
                             std::vector<std::uint64_t>& count) {
    count.assign(m, 0);
    for (std::uint32_t a : assignment) {
        ++count[a];
    }
    LocalMembers members;
    members.offset.assign(m + 1, 0);
    for (std::size_t j = 0; j < m; ++j) {
        members.offset[j + 1] = members.offset[j] + count[j];
    }
    std::vector<std::size_t> cursor(members.offset.begin(), members.offset.end() - 1);
    members.order.resize(assignment.size());
    for (std::size_t i = 0; i < assignment.size(); ++i) {
        members.order[cursor[assignment[i]]++] = static_cast<std::uint32_t>(i);
    }
    return members;
}

std::uint64_t bits_of(double value) {
    std::uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof value);
    return bits;
}

double double_of(std::uint64_t bits) {
    double value = 0.0;
    std::memcpy(&value, &bits, sizeof value);
    return value;
}

}  // namespace

void robust_reduce(const PointView& points, std::uint64_t first_row, const std::vector<std::uint32_t>& assignment,
                   const std::vector<double>& distance, const Matrix& anchors, double trim, Collective& ranks,
                   std::vector<double>& means, AnchorStats& stats) {
    const std::size_t m = anchors.rows;
    const std::size_t d = points.cols;
    std::vector<std::uint64_t> count;
    LocalMembers members = group_by_anchor(assignment, m, count);
    ranks.sum(count.data(), m);
    std::vector<std::uint64_t> keep(m);
    for (std::size_t j = 0; j < m; ++j) {
        keep[j] = count[j] - static_cast<std::uint64_t>(std::floor(trim * static_cast<double>(count[j])));
    }
    select_kept(members, distance, first_row, count, keep, ranks);
    // This rank's kept members of anchor j.
    const auto kept = [&](std::size_t j) {
        const std::uint32_t* first = members.order.data() + members.offset[j];
        return std::pair{first, first + members.kept[j]};
    };

    // The largest kept distance of each anchor, which bounds its grids.
    std::vector<std::uint64_t> farthest(m, 0);
#pragma omp parallel for schedule(dynamic, 16)
    for (std::size_t j = 0; j < m; ++j) {
        double far = 0.0;
        for (auto [i, last] = kept(j); i != last; ++i) {
            far = std::max(far, distance[*i]);
        }
        farthest[j] = bits_of(far);
    }
    ranks.max(farthest.data(), m);

    // Rows 0 .. m * d: the coordinate sums; then the m distance sums.
    std::vector<std::int64_t> sums(m * d + m, 0);
    std::vector<SumGrid> coordinates(m), distances(m);
    bool outside = false;
#pragma omp parallel for schedule(dynamic, 4) reduction(|| : outside)
    for (std::size_t j = 0; j < m; ++j) {
        if (count[j] == 0) {
            continue;
        }
        const float* anchor = anchors.row(j);
        double largest = 0.0;
        for (std::size_t k = 0; k < d; ++k) {
            largest = std::max(largest, std::abs(static_cast<double>(anchor[k])));
        }
        const double far = double_of(farthest[j]);
        // grid_of, not grid_for: a throw inside the parallel loop would end the process.
        const SumGrid& grid = coordinates[j] = grid_of(coordinate_bound(largest, far), keep[j]);
        const SumGrid& distance_steps = distances[j] = grid_of(distance_bound(far), keep[j]);
        if (!(std::isfinite(far) && std::isfinite(largest) && grid_in_range(grid) && grid_in_range(distance_steps))) {
            outside = true;
            continue;
        }
        std::int64_t* sum = sums.data() + j * d;
        // A batch of kBatch members adds exactly in doubles (exact_sums.hpp), then moves into the sums.
        thread_local std::vector<double> batch;
        thread_local std::vector<float> scratch;
        batch.assign(d, 0.0);
        scratch.resize(d);
        double batch_distance = 0.0;
        std::size_t in_batch = 0;
        // The bound of exact_sums.hpp, checked on each batch's sums: a row past it would be a
        // distance that does not belong to the row.
        const auto flush = [&] {
            const double most = grid.limit * static_cast<double>(in_batch);
            for (std::size_t k = 0; k < d; ++k) {
                outside = outside || std::abs(batch[k]) > most;
                sum[k] += static_cast<std::int64_t>(batch[k]);
                batch[k] = 0.0;
            }
            sums[m * d + j] += static_cast<std::int64_t>(batch_distance);
            batch_distance = 0.0;
            in_batch = 0;
        };
        for (auto [member, last] = kept(j); member != last; ++member) {
            const std::uint32_t i = *member;
            const float* x = points.row(i, scratch.data());
            double* to = batch.data();
            for (std::size_t k = 0; k < d; ++k) {
                to[k] += on_grid(x[k], grid);
            }
            batch_distance += on_grid(distance[i], distance_steps);
            if (++in_batch == kBatch) {
                flush();
            }
        }
        flush();
    }
    // Every rank stops, or none: one that threw alone would leave the others waiting on the sum.
    std::uint64_t stray = outside ? 1 : 0;
    ranks.max(&stray, 1);
    if (stray != 0) {
        throw Error("cpu backend: robust_reduce met a kept member farther from its anchor than its distance says, "
                    "or an anchor whose sums leave double's range");
    }
    ranks.sum(sums.data(), sums.size());

    stats.count.assign(m, 0);
    stats.kept.assign(m, 0);
    stats.variance.assign(m, 0.0);
    means.resize(m * d);
    for (std::size_t j = 0; j < m; ++j) {
        stats.count[j] = static_cast<std::uint32_t>(count[j]);
        if (count[j] == 0) {
            continue;
        }
        const double members_kept = static_cast<double>(keep[j]);
        double* mean = means.data() + j * d;
        const float* anchor = anchors.row(j);
        double shift = 0.0;  // ||mean - anchor||^2
        for (std::size_t k = 0; k < d; ++k) {
            mean[k] = from_grid(sums[j * d + k], coordinates[j]) / members_kept;
            shift += (mean[k] - anchor[k]) * (mean[k] - anchor[k]);
        }
        stats.kept[j] = static_cast<std::uint32_t>(keep[j]);
        // Parallel-axis theorem: spread about the mean = spread about the anchor - the mean's offset.
        stats.variance[j] =
            std::max(0.0, from_grid(sums[m * d + j], distances[j]) / members_kept - shift);
    }
}

}  // namespace vlattice::cpu
