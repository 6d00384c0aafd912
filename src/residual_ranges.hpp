// The per-anchor, per-dimension range of the residuals, and the cells a width cuts it into: shared by
// the encoder and by the width allocation, which must price exactly the quantiser the encoder uses.
#pragma once

#include "member_lists.hpp"
#include "vlattice/types.hpp"

namespace vlattice {

struct ResidualRanges {
    Matrix lo;  // m x d: the smallest x_k - c_k over the anchor's members (0 for an anchor without any)
    Matrix hi;  // m x d: the largest
};

ResidualRanges residual_ranges(const Matrix& points, const Matrix& anchors, const MemberLists& lists);

// 2^bits cells of width step over [lo, hi]; cell t decodes to offset + step * t.
struct CellGrid {
    float step = 0.0f;
    float offset = 0.0f;
};

inline CellGrid cell_grid(float lo, float hi, unsigned bits) {
    CellGrid grid;
    grid.step = (hi - lo) / static_cast<float>(1u << bits);
    grid.offset = lo + grid.step * 0.5f;
    return grid;
}

}  // namespace vlattice
