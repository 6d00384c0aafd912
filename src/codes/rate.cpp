// Budget arithmetic and the width allocation (include/vlattice/rate.hpp).
#include "vlattice/rate.hpp"

#include "codes/residual_ranges.hpp"
#include "fit/member_lists.hpp"
#include "vlattice/format.hpp"
#include "vlattice/residual.hpp"

#include <algorithm>
#include <array>
#include <cmath>

namespace vlattice {

double assignment_bytes_per_vector(std::size_t n, std::size_t m) {
    const double bits = static_cast<double>(n) * assignment_bits(m);
    return std::ceil(bits / 8.0) / static_cast<double>(n);
}

namespace {

void check_budget(double budget_bytes) {
    if (!std::isfinite(budget_bytes) || budget_bytes < 0.0) {
        throw Error("the byte budget per vector must be a finite number >= 0, not " + std::to_string(budget_bytes));
    }
}

}  // namespace

std::size_t anchors_within(double budget_bytes, std::size_t n, std::size_t wanted) {
    check_budget(budget_bytes);
    std::size_t m = std::min(wanted, n);
    // Halving m drops one bit per id; the count stays a power of two once it had to shrink.
    while (m > 1 && assignment_bytes_per_vector(n, m) > budget_bytes) {
        m = std::size_t{1} << (assignment_bits(m) - 1);
    }
    return std::max<std::size_t>(m, 1);
}

std::size_t residual_bytes_within(double budget_bytes, std::size_t n, std::size_t m, std::size_t d) {
    check_budget(budget_bytes);
    const double left = budget_bytes - assignment_bytes_per_vector(n, m);
    if (left < 1.0) {
        return 0;
    }
    // Capped before the conversion: a budget of 2^64 bytes or more does not fit a size_t, and its
    // conversion gave 0, no residual codes at all.
    return static_cast<std::size_t>(std::min(std::floor(left), static_cast<double>(d)));
}

namespace {

constexpr std::size_t kWidthCount = kResidualWidths.size();
// Anchors per block of the error table: blocks are summed in order, so the table does not depend on
// the thread count, while a block's table (d x 4 doubles) stays small.
constexpr std::size_t kAnchorsPerBlock = 16;

using ErrorTable = std::vector<std::array<double, kWidthCount>>;  // per dimension, per width

ErrorTable quantiser_errors(const Matrix& points, const Matrix& anchors, const std::vector<std::uint32_t>& assignments) {
    const std::size_t d = anchors.cols;
    const MemberLists lists = member_lists(assignments, anchors.rows);
    const ResidualRanges ranges = residual_ranges(points, anchors, lists);
    const std::size_t blocks = (anchors.rows + kAnchorsPerBlock - 1) / kAnchorsPerBlock;
    std::vector<ErrorTable> partial(blocks, ErrorTable(d, std::array<double, kWidthCount>{}));
    const std::ptrdiff_t block_count = static_cast<std::ptrdiff_t>(blocks);
#pragma omp parallel for schedule(dynamic, 1)
    for (std::ptrdiff_t bb = 0; bb < block_count; ++bb) {
        const auto b = static_cast<std::size_t>(bb);
        ErrorTable& table = partial[b];
        const std::size_t end = std::min(anchors.rows, (b + 1) * kAnchorsPerBlock);
        std::vector<std::array<CellGrid, kWidthCount>> grids(d);
        for (std::size_t j = b * kAnchorsPerBlock; j < end; ++j) {
            const float* lo = ranges.lo.row(j);
            const float* c = anchors.row(j);
            for (std::size_t k = 0; k < d; ++k) {
                for (std::size_t w = 0; w < kWidthCount; ++w) {
                    grids[k][w] = cell_grid(lo[k], ranges.hi.row(j)[k], ranges.mean.row(j)[k], kResidualWidths[w]);
                }
            }
            for (std::size_t p = lists.start[j]; p < lists.start[j + 1]; ++p) {
                const float* x = points.row(lists.members[p]);
                for (std::size_t k = 0; k < d; ++k) {
                    const double r = static_cast<double>(x[k]) - c[k];
                    for (std::size_t w = 0; w < kWidthCount; ++w) {
                        const CellGrid& grid = grids[k][w];
                        const double last = static_cast<double>((1u << kResidualWidths[w]) - 1);
                        const double cell = grid.step > 0.0f ? std::clamp(std::floor((r - lo[k]) / grid.step), 0.0, last) : 0.0;
                        const double error = r - (grid.offset + static_cast<double>(grid.step) * cell);
                        table[k][w] += error * error;
                    }
                }
            }
        }
    }
    ErrorTable total(d, std::array<double, kWidthCount>{});
    for (const ErrorTable& table : partial) {
        for (std::size_t k = 0; k < d; ++k) {
            for (std::size_t w = 0; w < kWidthCount; ++w) {
                total[k][w] += table[k][w];
            }
        }
    }
    return total;
}

}  // namespace

std::vector<std::uint8_t> allocate_widths(const Matrix& points, const Matrix& anchors,
                                          const std::vector<std::uint32_t>& assignments, std::size_t bits_per_vector) {
    const std::size_t d = anchors.cols;
    std::vector<std::size_t> level(d, 0);
    if (bits_per_vector == 0) {
        return std::vector<std::uint8_t>(d, 0);
    }
    const ErrorTable errors = quantiser_errors(points, anchors, assignments);
    std::size_t left = bits_per_vector;
    for (;;) {
        std::size_t best = d;
        double best_gain = 0.0;
        for (std::size_t k = 0; k < d; ++k) {
            if (level[k] + 1 >= kWidthCount) {
                continue;
            }
            const unsigned cost = kResidualWidths[level[k] + 1] - kResidualWidths[level[k]];
            const double gain = (errors[k][level[k]] - errors[k][level[k] + 1]) / cost;
            if (cost <= left && gain > best_gain) {
                best = k;
                best_gain = gain;
            }
        }
        if (best == d) {
            break;
        }
        left -= kResidualWidths[level[best] + 1] - kResidualWidths[level[best]];
        ++level[best];
    }
    std::vector<std::uint8_t> bits(d);
    for (std::size_t k = 0; k < d; ++k) {
        bits[k] = static_cast<std::uint8_t>(kResidualWidths[level[k]]);
    }
    return bits;
}

std::string describe_widths(const std::vector<std::uint8_t>& bits) {
    std::string out;
    for (auto w = kResidualWidths.rbegin(); w != kResidualWidths.rend(); ++w) {
        const auto count = std::count(bits.begin(), bits.end(), *w);
        if (count > 0) {
            out += (out.empty() ? "" : ", ") + std::to_string(count) + " x " + std::to_string(*w) + " bits";
        }
    }
    return out;
}

}  // namespace vlattice
