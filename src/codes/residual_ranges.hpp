// The per-anchor, per-dimension range of the residuals, and the cells a width cuts it into: shared by
// the encoder and by the width allocation, which must price exactly the quantiser the encoder uses.
#pragma once

#include "fit/member_lists.hpp"
#include "vlattice/types.hpp"

namespace vlattice {

struct ResidualRanges {
    Matrix lo;    // m x d: the smallest x_k - c_k over the anchor's members (0 for an anchor without any)
    Matrix hi;    // m x d: the largest
    Matrix mean;  // m x d: their mean (summed in double, in member order)
};

ResidualRanges residual_ranges(const Matrix& points, const Matrix& anchors, const MemberLists& lists);

// 2^bits cells of width step over [lo, hi]; cell t decodes to offset + step * t, the cell's centre.
// With no bits there is one value, and the mean serves better than the centre: the residuals of
// bounded data (pixels, counts) are skewed, and the mean is what the anchor update aims at anyway.
// Its step is twice the largest distance from the mean, so that step / 2 stays the bound.
struct CellGrid {
    float step = 0.0f;
    float offset = 0.0f;
};

inline CellGrid cell_grid(float lo, float hi, float mean, unsigned bits) {
    CellGrid grid;
    if (bits == 0) {
        grid.offset = mean;
        grid.step = 2.0f * (hi - mean > mean - lo ? hi - mean : mean - lo);
        return grid;
    }
    grid.step = (hi - lo) / static_cast<float>(1u << bits);
    grid.offset = lo + grid.step * 0.5f;
    return grid;
}

}  // namespace vlattice
