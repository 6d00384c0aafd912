// The repair's window of the single-product kernel, per point row, from the rounding that actually
// happened rather than its worst case.
//
// The kernel scores anchor j by v_j = ||ch_j||^2 - 2 xh.ch_j, with xh and ch_j the 16-bit heads of
// the point and the anchor: up to the tensor cores' accumulation error E, that is ||xh - ch_j||^2
// less ||xh||^2, the same for every anchor. The heads sit within ||x - xh|| + ||c_j - ch_j|| <= eps
// of the true rows, so by the triangle inequality the true distance's root is within eps of
// sqrt(v_j + ||xh||^2 +- E). Anchor j can then be nearer than the fast best b only if
//     v_j <= v_b + 2 E + 4 eps^2 + 4 eps sqrt(v_b + ||xh||^2 + E),
// a window proportional to the rounding of the rows times the distance, where the worst-case bound
// (2^-10 of ||x||^2 + ||c||^2) is proportional to the norms: for points far from the origin next to
// their anchors, ten times narrower and more.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace vlattice::cuda {

struct SingleWindowArgs {
    const float* point_head_norms = nullptr;  // n: ||xh||^2, rounded up (launch_head_norms)
    const float* point_roundings = nullptr;   // n: ||x - xh||, rounded up
    const unsigned* anchor_maxima = nullptr;  // float bits of the largest ||ch||^2 and ||c - ch||
    // |error| of a dot product's accumulation relative to the sum of |products| (single_accumulation_factor).
    float accumulation = 0.0f;
    float absolute = 0.0f;  // for two distances: values below the 16-bit type's normal range
    bool repair = true;     // false: every window is empty (the fast argmin stands)
};

// The window as a function of the row's best value v (which leaves out ||xh||^2, as Candidate does):
// fixed + slope sqrt(max(v + offset, 0)). It grows with v, so a window taken at any value the row
// has seen is at least the one at its final best.
struct RowWindow {
    float fixed = 0.0f;
    float slope = 0.0f;
    float offset = 0.0f;
    __device__ __forceinline__ float operator()(float best) const {
        return fmaf(slope, sqrtf(fmaxf(best + offset, 0.0f)), fixed);
    }
};

constexpr float kWindowSlack = 1.0f + 1.0f / 1024.0f;
constexpr float kFloatUnit = 1.0f / 16777216.0f;  // 2^-24

// What a row's bounds are made of: ||xh||^2 (rounded up), the largest magnitude of any value and
// partial sum, the error E of a value, and eps, how far the heads may be from the rows.
struct RowRounding {
    float p2;
    float base;
    float error;
    float eps;
};
__device__ __forceinline__ RowRounding row_rounding(const SingleWindowArgs& w, std::size_t row) {
    RowRounding r;
    r.p2 = w.point_head_norms[row];
    const float p = sqrtf(r.p2);
    const float m = sqrtf(__uint_as_float(w.anchor_maxima[0]));
    // Bounds |v| and every partial sum of the kernel: ||ch||^2 + 2 ||xh|| ||ch||.
    r.base = (p + m) * (p + m);
    // The accumulation's error on 2 xh.ch, plus the rounding of the anchor's norm and of v itself.
    r.error = w.accumulation * 2.0f * p * m + 8.0f * kFloatUnit * r.base;
    r.eps = w.point_roundings[row] + __uint_as_float(w.anchor_maxima[1]);
    return r;
}

// What the repair uses (kernel false) and what the kernel prunes with (kernel true): wider by 2^-10
// and by units of float32 rounding of the largest values, more than two units in the last place of
// v + window, so that the kernel's bound v + window lies strictly above the repair's. Every float
// operation here rounds by a relative 2^-24 at most; the slack of 2^-10 on each term, and the
// multiples of 2^-24 of the largest magnitude, cover them and the rounding of v + window. Rows past
// the last point, and every row without a repair, get an empty window.
__device__ __forceinline__ RowWindow single_row_window(const SingleWindowArgs& w, std::size_t row, std::size_t n,
                                                       bool kernel) {
    RowWindow window;
    if (row >= n || !w.repair) {
        return window;
    }
    const RowRounding r = row_rounding(w, row);
    const float slack = kernel ? kWindowSlack * kWindowSlack : kWindowSlack;
    window.fixed = (2.0f * r.error + 4.0f * r.eps * r.eps + w.absolute) * slack +
                   (kernel ? 24.0f : 8.0f) * kFloatUnit * r.base;
    window.slope = 4.0f * r.eps * slack;
    window.offset = (r.p2 + r.error) * kWindowSlack + 4.0f * kFloatUnit * r.base;
    return window;
}

// The last assign's answer, which bounds this one's before the kernel has seen a single anchor.
struct PriorArgs {
    const double* distance = nullptr;          // n: ||x - c||^2 to the point's anchor at the last assign
    const std::uint32_t* assignment = nullptr; // n: that anchor (m or more: none)
    const float* moved = nullptr;              // m: how far each anchor has moved since, at most (+inf: replaced)
};

// An upper bound on the row's least value, from the anchor a it had: ||x - c_a|| is now at most
// sqrt(distance) + moved[a], ||xh - ch_a|| at most that + eps, and the kernel's value for a at most
// ||xh - ch_a||^2 - ||xh||^2 + E. +inf without a prior anchor. In double, then rounded up with slack.
__device__ __forceinline__ float prior_best(const SingleWindowArgs& w, const PriorArgs& prior, std::size_t row,
                                            std::size_t n, std::size_t m) {
    if (prior.distance == nullptr || row >= n) {
        return __int_as_float(0x7f800000);
    }
    const std::uint32_t a = prior.assignment[row];
    if (a >= m) {
        return __int_as_float(0x7f800000);
    }
    const RowRounding r = row_rounding(w, row);
    const double reach = sqrt(prior.distance[row]) + static_cast<double>(prior.moved[a]) + r.eps;
    const double p2_low = static_cast<double>(r.p2) * (1.0 - 1.0 / 1048576.0);
    const double value = reach * reach - p2_low + r.error;
    return __double2float_ru(value + fabs(value) / 1048576.0 + 8.0 * kFloatUnit * r.base);
}

}  // namespace vlattice::cuda
