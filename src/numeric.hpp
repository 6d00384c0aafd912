// Small numeric kernels shared by the init, the CPU backend and maintenance. Results must not depend
// on the number of threads, so sums over points go through fixed-size blocks added in order.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

// Before a function: compiles it a second time for x86-64-v3 (AVX2, F16C) and picks the copy when the
// program loads, where the CPU has it. Only for functions whose every result is the same bits in
// both copies (the library is built with -ffp-contract=off, so nothing is fused).
// VLATTICE_ALSO_FOR_X86_64_V3_V4 adds a copy for x86-64-v4 (AVX-512), for loops whose accumulators
// fit its 32 vector registers and spill in AVX2's 16.
#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__)
#define VLATTICE_ALSO_FOR_X86_64_V3 __attribute__((target_clones("arch=x86-64-v3", "default")))
#define VLATTICE_ALSO_FOR_X86_64_V3_V4 \
    __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define VLATTICE_ALSO_FOR_X86_64_V3
#define VLATTICE_ALSO_FOR_X86_64_V3_V4
#endif

namespace vlattice {

// ||a - b||^2 accumulated in double (numeric.cpp), in an order written out, so the same bits on
// every call, thread and CPU.
double squared_distance(const float* a, const float* b, std::size_t d);

// ||a - b||^2 for k-means++ weights, in float and in an order written out rather than left to the
// compiler: lane l of kDistanceLanes sums coordinates l, l + 16, ... in turn (the last, partial
// group fills lanes 0, 1, ...), then the lanes are added in a fixed tree. The compiler still
// vectorises the lanes, and the GPU (cuda/math/ordered_distance.cuh: k-means++, search) repeats exactly these
// roundings, so both pick the same anchors. Float is plenty for weights that only steer random
// choices, and for the 2-means that seeds a split (maintenance), which the annealing refines.
constexpr std::size_t kDistanceLanes = 16;

// The fixed tree that adds the kDistanceLanes lanes. Spelled out level by level: as a loop, the
// compiler left the lanes in memory and spent about a quarter of a 128-d distance on this sum.
inline float lane_tree(const float* lane) {
    static_assert(kDistanceLanes == 16, "the tree below adds 16 lanes");
    float half[8];
    for (std::size_t l = 0; l < 8; ++l) {
        half[l] = lane[l] + lane[l + 8];
    }
    float quarter[4];
    for (std::size_t l = 0; l < 4; ++l) {
        quarter[l] = half[l] + half[l + 4];
    }
    return (quarter[0] + quarter[2]) + (quarter[1] + quarter[3]);
}

// The lanes and the tree of ordered_squared_distance, summing term(a[k], rows[r][k]) over the
// coordinates for each of kRows rows into out[r]. Each row's sum is the one it has alone.
template <std::size_t kRows, class Term>
inline void ordered_lane_sums(const float* a, const float* const* rows, std::size_t d, Term term, float* out) {
    float lane[kRows][kDistanceLanes] = {};
    std::size_t k = 0;
    for (; k + kDistanceLanes <= d; k += kDistanceLanes) {
        for (std::size_t r = 0; r < kRows; ++r) {
            for (std::size_t l = 0; l < kDistanceLanes; ++l) {
                lane[r][l] += term(a[k + l], rows[r][k + l]);
            }
        }
    }
    for (std::size_t r = 0; r < kRows; ++r) {
        for (std::size_t l = 0, tail = k; tail < d; ++tail, ++l) {
            lane[r][l] += term(a[tail], rows[r][tail]);
        }
        out[r] = lane_tree(lane[r]);
    }
}

template <class Term>
inline float ordered_lane_sum(const float* a, const float* b, std::size_t d, Term term) {
    float out = 0.0f;
    ordered_lane_sums<1>(a, &b, d, term, &out);
    return out;
}

// The terms of ordered_squared_distance and of ordered_dot.
inline float squared_difference_term(float x, float y) {
    const float diff = x - y;
    return diff * diff;
}
inline float product_term(float x, float y) { return x * y; }

inline double ordered_squared_distance(const float* a, const float* b, std::size_t d) {
    return ordered_lane_sum(a, b, d, squared_difference_term);
}

// a . b in float, in the lanes and tree of ordered_squared_distance: the inner-product search's
// score, which the GPU (cuda/math/ordered_distance.cuh) repeats rounding for rounding. Every lane starts
// at +0, so the result is never -0.
inline float ordered_dot(const float* a, const float* b, std::size_t d) {
    return ordered_lane_sum(a, b, d, product_term);
}

// |a - b| relative to the larger magnitude; 0 when both are 0.
inline double relative_difference(double a, double b) {
    const double scale = std::max(std::abs(a), std::abs(b));
    return scale > 0.0 ? std::abs(a - b) / scale : 0.0;
}

inline double squared_norm(const float* a, std::size_t d) {
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (std::size_t k = 0; k < d; ++k) {
        sum += static_cast<double>(a[k]) * static_cast<double>(a[k]);
    }
    return sum;
}

// Passes over fewer values than this run on one thread: starting or waking the OpenMP team took
// 0.3-3.5 ms on the GPU machine, more than a pass over 10,000 x 128 points on one core.
constexpr std::size_t kParallelValues = std::size_t{4} << 20;

// The terms a deterministic sum adds in order before its block sums are added in order.
constexpr std::size_t kSumBlock = 1024;

// The sums of the blocks of kSumBlock terms of sum_{i < n} term(i), each added in order. In
// parallel when the n terms read at least kParallelValues values (values_per_term each).
template <class Term>
std::vector<double> block_sums(std::size_t n, Term term, std::size_t values_per_term = 1) {
    const std::size_t blocks = (n + kSumBlock - 1) / kSumBlock;
    std::vector<double> partial(blocks, 0.0);
#pragma omp parallel for schedule(static) if (n * values_per_term >= kParallelValues)
    for (std::size_t b = 0; b < blocks; ++b) {
        double sum = 0.0;
        const std::size_t end = (b + 1) * kSumBlock < n ? (b + 1) * kSumBlock : n;
        for (std::size_t i = b * kSumBlock; i < end; ++i) {
            sum += term(i);
        }
        partial[b] = sum;
    }
    return partial;
}

inline double ordered_total(const std::vector<double>& values) {
    double total = 0.0;
    for (double v : values) {
        total += v;
    }
    return total;
}

// sum_{i < n} term(i) in double, with the same rounding whatever the thread count: each block of
// kSumBlock terms is summed in order, then the block sums in order.
template <class Term>
double deterministic_sum(std::size_t n, Term term, std::size_t values_per_term = 1) {
    return ordered_total(block_sums(n, term, values_per_term));
}

}  // namespace vlattice
