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
    const float* point_head_norms = nullptr;  // n: ||xh||^2, rounded up (launch_head_norms); null: no repair
    const float* point_roundings = nullptr;   // n: ||x - xh||, rounded up
    const unsigned* anchor_maxima = nullptr;  // float bits of the largest ||ch||^2 and ||c - ch||
    // |error| of a dot product's accumulation relative to the sum of |products| (single_accumulation_factor).
    float accumulation = 0.0f;
    float absolute = 0.0f;  // for two distances: values below the 16-bit type's normal range
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

// What the repair uses (kernel false) and what the kernel prunes with (kernel true): wider by 2^-10
// and by units of float32 rounding of the largest values, more than two units in the last place of
// v + window, so that the kernel's bound v + window lies strictly above the repair's. Every float operation here rounds by a relative 2^-24 at most; the
// slack of 2^-10 on each term, and the multiples of 2^-24 of the largest magnitude, cover them and
// the rounding of v + window. Rows past the last point, and every row without a repair, get an
// empty window.
__device__ __forceinline__ RowWindow single_row_window(const SingleWindowArgs& w, std::size_t row, std::size_t n,
                                                       bool kernel) {
    RowWindow window;
    if (row >= n || w.point_head_norms == nullptr) {
        return window;
    }
    constexpr float kSlack = 1.0f + 1.0f / 1024.0f;
    constexpr float kUnit = 1.0f / 16777216.0f;  // 2^-24
    const float p2 = w.point_head_norms[row];
    const float p = sqrtf(p2);
    const float m = sqrtf(__uint_as_float(w.anchor_maxima[0]));
    // Bounds |v| and every partial sum of the kernel: ||ch||^2 + 2 ||xh|| ||ch||.
    const float base = (p + m) * (p + m);
    // The accumulation's error on 2 xh.ch, plus the rounding of the anchor's norm and of v itself.
    const float e = w.accumulation * 2.0f * p * m + 8.0f * kUnit * base;
    const float eps = w.point_roundings[row] + __uint_as_float(w.anchor_maxima[1]);
    const float slack = kernel ? kSlack * kSlack : kSlack;
    window.fixed = (2.0f * e + 4.0f * eps * eps + w.absolute) * slack + (kernel ? 24.0f : 8.0f) * kUnit * base;
    window.slope = 4.0f * eps * slack;
    window.offset = (p2 + e) * kSlack + 4.0f * kUnit * base;
    return window;
}

}  // namespace vlattice::cuda
