// Sums of doubles added one at a time in a fixed order, as the CPU's loops add them, computed by a
// whole block of threads. In order, the additions are one serial chain. But when no partial sum
// rounds (every term a multiple of 2^L, and the whole sum below 2^(L + 53)), every order of
// addition gives the same bits, and the block adds in parallel instead; whether that holds is
// decided from the terms each time. Embeddings' squared distances are floats within a few orders
// of magnitude of one another, so the chain is the exception.
#pragma once

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cuda/functional>
#include <math_constants.h>

#include <climits>
#include <cstddef>
#include <cstdint>

namespace vlattice::cuda {

// Where a walk that adds values[0, count) in order to `start` first exceeds `target`: the index
// (count if it never does) and the running sum before it.
struct Landing {
    std::size_t index;
    double before;
};

// Term k of the values: an array's element, or what a callable gives for k (terms computed on the fly).
template <class T>
__device__ inline double term(T* values, std::size_t k) {
    return values[k];
}
template <class Values>
__device__ inline double term(const Values& values, std::size_t k) {
    return values(k);
}

// The exponent of the lowest set bit of a positive finite double: v is a multiple of 2^lowest_bit(v).
__device__ inline int lowest_bit(double v) {
    const auto bits = static_cast<unsigned long long>(__double_as_longlong(v));
    const int biased = static_cast<int>((bits >> 52) & 0x7ff);
    const unsigned long long mantissa = (bits & ((1ull << 52) - 1)) | (biased != 0 ? 1ull << 52 : 0ull);
    return (biased != 0 ? biased : 1) - 1075 + __ffsll(static_cast<long long>(mantissa)) - 1;
}

// Every thread of a block of kThreads calls every member together, with the same arguments; all
// get the same results.
template <int kThreads>
class OrderedSums {
public:
    // Values staged in shared memory at a time for the serial chain.
    static constexpr std::size_t kStage = 1024;

    struct TempStorage {
        union {
            typename cub::BlockReduce<double, kThreads>::TempStorage sum;
            typename cub::BlockReduce<int, kThreads>::TempStorage low;
            typename cub::BlockScan<double, kThreads>::TempStorage scan;
        } cub;
        double stage[kStage];
        unsigned long long first;
        double before;
        double sum;
        int low;
    };

    // What proves a run of terms free of rounding: the lowest set bit among them (INT_MAX when all
    // are zero) and their sum added in any order, each addition rounded. The exact sum E is a
    // multiple of 2^low; while E < 2^(low + 53) no running sum in any order rounds. A rounded sum
    // S of n positive terms is at least E (1 - n 2^-53), so S < 2^(low + 52) proves E < 2^(low + 53).
    // The bounds of consecutive runs combine: the least of their lows, the sum of their sums.
    struct Bound {
        int low;
        double sum;
    };
    __device__ static bool nothing_rounds(const Bound& b) { return b.low == INT_MAX || b.sum < ldexp(1.0, b.low + 52); }

    __device__ explicit OrderedSums(TempStorage& t) : t_(t) {}

    // The bound of start, values[0], values[1], ...
    template <class Values>
    __device__ Bound bound(const Values& values, std::size_t count, double start) {
        int low = INT_MAX;
        double sum = 0.0;
        for (std::size_t k = threadIdx.x; k < count; k += kThreads) {
            const double v = term(values, k);
            if (v > 0.0) {
                low = min(low, lowest_bit(v));
                sum += v;
            }
        }
        if (threadIdx.x == 0 && start > 0.0) {
            low = min(low, lowest_bit(start));
            sum += start;
        }
        return reduce(low, sum);
    }

    // The bound of `count` runs from their sums and lows.
    __device__ Bound combine(const double* sums, const int* lows, std::size_t count) {
        int low = INT_MAX;
        double sum = 0.0;
        for (std::size_t k = threadIdx.x; k < count; k += kThreads) {
            low = min(low, lows[k]);
            sum += sums[k];
        }
        return reduce(low, sum);
    }

    // start + values[0] + values[1] + ..., in that order; values is an array or a callable (term).
    template <class Values>
    __device__ double total(const Values& values, std::size_t count, double start) {
        return total(values, count, start, bound(values, count, start));
    }
    // The same, given the bound of these terms.
    template <class Values>
    __device__ double total(const Values& values, std::size_t count, double start, const Bound& b) {
        return nothing_rounds(b) ? b.sum : serial_land(values, count, start, CUDART_INF).before;
    }

    // The first index at which the running sum from `start` exceeds `target`. `proven`: the caller
    // knows that no running sum of these terms rounds (a combined bound), and nothing is checked.
    template <class Values>
    __device__ Landing land(const Values& values, std::size_t count, double start, double target, bool proven = false) {
        return proven || nothing_rounds(bound(values, count, start)) ? parallel_land(values, count, start, target)
                                                                     : serial_land(values, count, start, target);
    }

private:
    static constexpr int kAhead = 8;
    static constexpr unsigned long long kNone = ~0ull;

    // The block's least low and sum of sums, the same in every thread.
    __device__ Bound reduce(int low, double sum) {
        low = cub::BlockReduce<int, kThreads>(t_.cub.low).Reduce(low, ::cuda::minimum<int>{});
        __syncthreads();
        sum = cub::BlockReduce<double, kThreads>(t_.cub.sum).Sum(sum);
        if (threadIdx.x == 0) {
            t_.low = low;
            t_.sum = sum;
        }
        __syncthreads();
        return {t_.low, t_.sum};
    }

    // When nothing rounds, the scan's partial sums in the block's order are the chain's exactly.
    template <class Values>
    __device__ Landing parallel_land(const Values& values, std::size_t count, double start, double target) {
        double carry = start;
        for (std::size_t base = 0; base < count; base += kThreads) {
            const std::size_t k = base + threadIdx.x;
            const double v = k < count ? term(values, k) : 0.0;
            double through = 0.0;
            double aggregate = 0.0;
            cub::BlockScan<double, kThreads>(t_.cub.scan).InclusiveSum(v, through, aggregate);
            if (threadIdx.x == 0) {
                t_.first = kNone;
            }
            __syncthreads();
            const double running = carry + through;
            if (k < count && running > target) {
                atomicMin(&t_.first, static_cast<unsigned long long>(k));
            }
            __syncthreads();
            const unsigned long long first = t_.first;
            if (first != kNone) {
                if (k == first) {
                    t_.before = carry + (through - v);
                }
                __syncthreads();
                return {static_cast<std::size_t>(first), t_.before};
            }
            carry += aggregate;
        }
        return {count, carry};
    }

    template <class Values>
    __device__ Landing serial_land(const Values& values, std::size_t count, double start, double target) {
        double carry = start;
        for (std::size_t base = 0; base < count; base += kStage) {
            const std::size_t size = count - base < kStage ? count - base : kStage;
            stage_values(values, base, size);
            running_sums(size, carry);
            const std::size_t k = first_above(size, target);
            if (k < size) {
                return {base + k, k > 0 ? t_.stage[k - 1] : carry};
            }
            carry = t_.stage[size - 1];
        }
        return {count, carry};
    }

    // Copies values[base, base + size) into the stage once every thread is done with what it held.
    template <class Values>
    __device__ void stage_values(const Values& values, std::size_t base, std::size_t size) {
        __syncthreads();
        for (std::size_t k = threadIdx.x; k < size; k += kThreads) {
            t_.stage[k] = term(values, base + k);
        }
        __syncthreads();
    }

    // Thread 0 turns stage[0, size) into its running sums from `start`, one addition at a time; the
    // loads run ahead of the chain.
    __device__ void running_sums(std::size_t size, double start) {
        if (threadIdx.x == 0) {
            double running = start;
            for (std::size_t k = 0; k < size; k += kAhead) {
                double ahead[kAhead];
#pragma unroll
                for (int u = 0; u < kAhead; ++u) {
                    ahead[u] = k + u < size ? t_.stage[k + u] : 0.0;
                }
#pragma unroll
                for (int u = 0; u < kAhead; ++u) {
                    if (k + u < size) {
                        running = __dadd_rn(running, ahead[u]);
                        t_.stage[k + u] = running;
                    }
                }
            }
        }
        __syncthreads();
    }

    // The first k < size with stage[k] > target, or size.
    __device__ std::size_t first_above(std::size_t size, double target) {
        if (threadIdx.x == 0) {
            t_.first = size;
        }
        __syncthreads();
        for (std::size_t k = threadIdx.x; k < size; k += kThreads) {
            if (t_.stage[k] > target) {
                atomicMin(&t_.first, static_cast<unsigned long long>(k));
                break;
            }
        }
        __syncthreads();
        const auto found = static_cast<std::size_t>(t_.first);
        __syncthreads();
        return found;
    }

    TempStorage& t_;
};

}  // namespace vlattice::cuda
