// Learning the per-anchor ranges and encoding the residuals (include/vlattice/residual.hpp).
#include "vlattice/residual.hpp"

#include "codes/residual_ranges.hpp"
#include "fit/member_lists.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace vlattice {

bool is_residual_width(unsigned bits) {
    return std::find(kResidualWidths.begin(), kResidualWidths.end(), bits) != kResidualWidths.end();
}

CodeLayout code_layout(const std::vector<std::uint8_t>& bits) {
    CodeLayout layout;
    layout.bits = bits;
    layout.byte.assign(bits.size(), 0);
    layout.shift.assign(bits.size(), 0);
    for (std::size_t k = 0; k < bits.size(); ++k) {
        if (!is_residual_width(bits[k])) {
            throw Error("residual width of dimension " + std::to_string(k) + " is " + std::to_string(bits[k]) +
                        " bits; the widths are 0, 2, 4 and 8");
        }
    }
    // Widest first: each group then starts on a multiple of its own width, so no value straddles a byte.
    std::size_t position = 0;
    for (const unsigned width : {8u, 4u, 2u}) {
        for (std::size_t k = 0; k < bits.size(); ++k) {
            if (bits[k] == width) {
                layout.byte[k] = static_cast<std::uint32_t>(position / 8);
                layout.shift[k] = static_cast<std::uint8_t>(position % 8);
                position += width;
            }
        }
    }
    layout.code_bytes = (position + 7) / 8;
    return layout;
}

namespace {

// The code whose decoded value is nearest x: the arithmetic guess, then its neighbours, because the
// float evaluation of decode_row can put the best cell one away from the guess.
unsigned nearest_code(float x, float c, float offset, float step, unsigned levels) {
    if (!(step > 0.0f)) {
        return 0;
    }
    const double guess = std::floor((static_cast<double>(x) - c - offset) / step + 0.5);
    const long centre = static_cast<long>(std::clamp(guess, 0.0, static_cast<double>(levels - 1)));
    unsigned best = 0;
    double best_error = INFINITY;
    for (long code = std::max(0L, centre - 1); code <= std::min<long>(levels - 1, centre + 1); ++code) {
        const float decoded = c + (offset + step * static_cast<float>(code));
        const double error = std::fabs(static_cast<double>(x) - decoded);
        if (error < best_error) {
            best_error = error;
            best = static_cast<unsigned>(code);
        }
    }
    return best;
}

}  // namespace

ResidualCodes learn_residual_ranges(const Matrix& points, const Matrix& anchors,
                                    const std::vector<std::uint32_t>& assignments, const std::vector<std::uint8_t>& bits) {
    const std::size_t d = anchors.cols;
    if (points.cols != d || bits.size() != d || assignments.size() != points.rows) {
        throw Error("encode_residuals: " + std::to_string(points.rows) + " x " + std::to_string(points.cols) +
                    " points, " + std::to_string(assignments.size()) + " assignments, anchors of dimension " +
                    std::to_string(d) + " and " + std::to_string(bits.size()) + " widths do not fit together");
    }
    const MemberLists lists = member_lists(assignments, anchors.rows);
    const ResidualRanges ranges = residual_ranges(points, anchors, lists);

    ResidualCodes out;
    out.layout = code_layout(bits);
    out.offset = Matrix(anchors.rows, d);
    out.step = Matrix(anchors.rows, d);
    for (std::size_t j = 0; j < anchors.rows; ++j) {
        for (std::size_t k = 0; k < d; ++k) {
            const CellGrid grid = cell_grid(ranges.lo.row(j)[k], ranges.hi.row(j)[k], ranges.mean.row(j)[k], bits[k]);
            if (!std::isfinite(grid.step)) {
                throw Error("the residuals of anchor " + std::to_string(j) + ", dimension " + std::to_string(k) +
                            " span more than float32 can hold");
            }
            out.step.row(j)[k] = grid.step;
            out.offset.row(j)[k] = grid.offset;
        }
    }
    return out;
}

void append_with_ranges(const ResidualCodes& codes, const Matrix& points, const Matrix& anchors,
                        const std::vector<std::uint32_t>& assignments, std::vector<std::uint8_t>& out) {
    const std::size_t d = anchors.cols;
    const CodeLayout& layout = codes.layout;
    if (points.cols != d || layout.bits.size() != d || assignments.size() != points.rows ||
        codes.offset.rows != anchors.rows) {
        throw Error("encode_with_ranges: " + std::to_string(points.rows) + " x " + std::to_string(points.cols) +
                    " points, " + std::to_string(assignments.size()) + " assignments and ranges of " +
                    std::to_string(codes.offset.rows) + " anchors of dimension " + std::to_string(d) +
                    " do not fit together");
    }
    const std::size_t start = out.size();
    out.resize(start + points.rows * layout.code_bytes, 0);
    const std::ptrdiff_t n = static_cast<std::ptrdiff_t>(points.rows);
#pragma omp parallel for schedule(static)
    for (std::ptrdiff_t ii = 0; ii < n; ++ii) {
        const auto i = static_cast<std::size_t>(ii);
        const std::uint32_t j = assignments[i];
        std::uint8_t* code = out.data() + start + i * layout.code_bytes;
        for (std::size_t k = 0; k < d; ++k) {
            if (layout.bits[k] == 0) {
                continue;
            }
            const unsigned value = nearest_code(points.row(i)[k], anchors.row(j)[k], codes.offset.row(j)[k],
                                                codes.step.row(j)[k], 1u << layout.bits[k]);
            code[layout.byte[k]] |= static_cast<std::uint8_t>(value << layout.shift[k]);
        }
    }
}

void encode_with_ranges(ResidualCodes& codes, const Matrix& points, const Matrix& anchors,
                        const std::vector<std::uint32_t>& assignments) {
    codes.codes.clear();
    append_with_ranges(codes, points, anchors, assignments, codes.codes);
}

ResidualCodes encode_residuals(const Matrix& points, const Matrix& anchors, const std::vector<std::uint32_t>& assignments,
                               const std::vector<std::uint8_t>& bits) {
    ResidualCodes out = learn_residual_ranges(points, anchors, assignments, bits);
    encode_with_ranges(out, points, anchors, assignments);
    return out;
}

}  // namespace vlattice
