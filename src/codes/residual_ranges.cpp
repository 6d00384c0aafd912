#include "codes/residual_ranges.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace vlattice {

ResidualRanges residual_ranges(const Matrix& points, const Matrix& anchors, const MemberLists& lists) {
    const std::size_t d = anchors.cols;
    ResidualRanges ranges{Matrix(anchors.rows, d), Matrix(anchors.rows, d), Matrix(anchors.rows, d)};
    const std::ptrdiff_t m = static_cast<std::ptrdiff_t>(anchors.rows);
#pragma omp parallel for schedule(dynamic, 4)
    for (std::ptrdiff_t jj = 0; jj < m; ++jj) {
        const auto j = static_cast<std::size_t>(jj);
        if (lists.start[j] == lists.start[j + 1]) {
            continue;
        }
        float* lo = ranges.lo.row(j);
        float* hi = ranges.hi.row(j);
        const float* c = anchors.row(j);
        std::fill(lo, lo + d, INFINITY);
        std::fill(hi, hi + d, -INFINITY);
        std::vector<double> sum(d, 0.0);
        for (std::size_t p = lists.start[j]; p < lists.start[j + 1]; ++p) {
            const float* x = points.row(lists.members[p]);
            for (std::size_t k = 0; k < d; ++k) {
                const float r = x[k] - c[k];
                lo[k] = std::min(lo[k], r);
                hi[k] = std::max(hi[k], r);
                sum[k] += r;
            }
        }
        const double count = static_cast<double>(lists.start[j + 1] - lists.start[j]);
        for (std::size_t k = 0; k < d; ++k) {
            // Rounding can put the float mean just outside [lo, hi] when they are equal.
            ranges.mean.row(j)[k] = std::clamp(static_cast<float>(sum[k] / count), lo[k], hi[k]);
        }
    }
    return ranges;
}

}  // namespace vlattice
