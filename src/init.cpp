#include "init.hpp"

#include "numeric.hpp"
#include "random.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

namespace vlattice {

namespace {

std::vector<std::size_t> draw_sample(std::size_t n, std::size_t size, Random& random) {
    std::vector<std::size_t> index(n);
    std::iota(index.begin(), index.end(), std::size_t{0});
    if (size >= n) {
        return index;
    }
    for (std::size_t i = 0; i < size; ++i) {  // partial Fisher-Yates
        std::swap(index[i], index[i + random.below(n - i)]);
    }
    index.resize(size);
    return index;
}

// Index into `weight` chosen with probability weight[i] / total.
std::size_t draw_weighted(const std::vector<double>& weight, double total, Random& random) {
    const double target = random.uniform() * total;
    double running = 0.0;
    for (std::size_t i = 0; i < weight.size(); ++i) {
        running += weight[i];
        if (running > target && weight[i] > 0.0) {
            return i;
        }
    }
    // Rounding can leave target just above the last partial sum: take the last positive weight.
    for (std::size_t i = weight.size(); i-- > 0;) {
        if (weight[i] > 0.0) {
            return i;
        }
    }
    return 0;
}

}  // namespace

Matrix kmeans_plus_plus(const Matrix& points, std::size_t m, std::size_t sample_size, std::uint64_t seed) {
    Random random(seed);
    const std::size_t d = points.cols;
    const std::vector<std::size_t> sample = draw_sample(points.rows, std::max(sample_size, m), random);
    const std::size_t s = sample.size();

    Matrix anchors(m, d);
    std::vector<double> nearest(s, 0.0);
    std::size_t chosen = sample[random.below(s)];
    for (std::size_t j = 0; j < m; ++j) {
        std::memcpy(anchors.row(j), points.row(chosen), d * sizeof(float));
        const float* anchor = anchors.row(j);
        const bool first = j == 0;
#pragma omp parallel for schedule(static)
        for (std::size_t i = 0; i < s; ++i) {
            const double dist = squared_distance(points.row(sample[i]), anchor, d);
            nearest[i] = first ? dist : std::min(nearest[i], dist);
        }
        if (j + 1 == m) {
            break;
        }
        const double total = deterministic_sum(s, [&](std::size_t i) { return nearest[i]; });
        chosen = total > 0.0 ? sample[draw_weighted(nearest, total, random)] : sample[random.below(s)];
    }
    return anchors;
}

}  // namespace vlattice
