// Brute-force references in double, written for clarity rather than speed: the tests compare every
// stage of the backends against these.
#pragma once

#include "vlattice/types.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

namespace vlattice::test {

inline double reference_distance(const Matrix& x, std::size_t i, const Matrix& c, std::size_t j) {
    double sum = 0.0;
    for (std::size_t k = 0; k < x.cols; ++k) {
        const double diff = static_cast<double>(x.row(i)[k]) - static_cast<double>(c.row(j)[k]);
        sum += diff * diff;
    }
    return sum;
}

inline double reference_squared_norm(const Matrix& x, std::size_t i) {
    double sum = 0.0;
    for (std::size_t k = 0; k < x.cols; ++k) {
        sum += static_cast<double>(x.row(i)[k]) * static_cast<double>(x.row(i)[k]);
    }
    return sum;
}

struct ReferenceAssign {
    std::vector<std::uint32_t> assignment;
    std::vector<double> distance;
    double energy = 0.0;
};

inline ReferenceAssign reference_assign(const Matrix& x, const Matrix& c) {
    ReferenceAssign out;
    for (std::size_t i = 0; i < x.rows; ++i) {
        double best = std::numeric_limits<double>::infinity();
        std::uint32_t best_j = 0;
        for (std::size_t j = 0; j < c.rows; ++j) {
            const double dist = reference_distance(x, i, c, j);
            if (dist < best) {
                best = dist;
                best_j = static_cast<std::uint32_t>(j);
            }
        }
        out.assignment.push_back(best_j);
        out.distance.push_back(best);
        out.energy += best;
    }
    out.energy /= static_cast<double>(x.rows);
    return out;
}

struct ReferenceReduce {
    std::vector<std::vector<double>> mean;  // empty for an empty anchor
    std::vector<std::uint32_t> count, kept;
    std::vector<double> variance;
};

inline ReferenceReduce reference_reduce(const Matrix& x, const ReferenceAssign& a, std::size_t m, double trim) {
    ReferenceReduce out;
    out.mean.resize(m);
    out.count.assign(m, 0);
    out.kept.assign(m, 0);
    out.variance.assign(m, 0.0);
    for (std::size_t j = 0; j < m; ++j) {
        std::vector<std::size_t> members;
        for (std::size_t i = 0; i < x.rows; ++i) {
            if (a.assignment[i] == j) {
                members.push_back(i);
            }
        }
        std::sort(members.begin(), members.end(), [&](std::size_t p, std::size_t q) {
            return a.distance[p] < a.distance[q] || (a.distance[p] == a.distance[q] && p < q);
        });
        out.count[j] = static_cast<std::uint32_t>(members.size());
        if (members.empty()) {
            continue;
        }
        const std::size_t keep = members.size() - static_cast<std::size_t>(std::floor(trim * members.size()));
        out.kept[j] = static_cast<std::uint32_t>(keep);
        std::vector<double> mean(x.cols, 0.0);
        for (std::size_t r = 0; r < keep; ++r) {
            for (std::size_t k = 0; k < x.cols; ++k) {
                mean[k] += x.row(members[r])[k];
            }
        }
        for (double& v : mean) {
            v /= static_cast<double>(keep);
        }
        double spread = 0.0;
        for (std::size_t r = 0; r < keep; ++r) {
            for (std::size_t k = 0; k < x.cols; ++k) {
                spread += (x.row(members[r])[k] - mean[k]) * (x.row(members[r])[k] - mean[k]);
            }
        }
        out.variance[j] = spread / static_cast<double>(keep);
        out.mean[j] = mean;
    }
    return out;
}

// Relative closeness with an absolute floor for values near zero.
inline bool close(double a, double b, double relative, double absolute = 1e-9) {
    return std::abs(a - b) <= relative * std::max(std::abs(a), std::abs(b)) + absolute;
}

}  // namespace vlattice::test
