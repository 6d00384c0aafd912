#include "two_means.cuh"

#include "cuda_check.hpp"
#include "ordered_distance.cuh"
#include "ordered_sums.cuh"
#include "warp_math.cuh"

#include "vlattice/two_means.hpp"

#include <cub/block/block_reduce.cuh>

namespace vlattice::cuda {

namespace {

// A thread per coordinate up to d = 1024, so that a single anchor's 2-means (a whole launch, when
// one anchor is split) runs its member-order sums once per coordinate instead of in four rounds.
constexpr int kThreads = 1024;
constexpr int kHalfWarps = kThreads / kDistanceLanes;

struct Piece {
    const float* rows;  // the anchor's members
    int count;
};

// to[i] = ordered_squared_distance(member i, centre) for every member: a half warp per member.
__device__ void distances_to(const Piece& p, const float* centre, int d, float* to, int stride) {
    const auto count = static_cast<std::size_t>(p.count);
    for_rows_by_half_warps(count, threadIdx.x / kDistanceLanes, kHalfWarps, [&](std::size_t i, bool valid, int l) {
        const float dist = ordered_squared_distance(p.rows + i * d, centre, d, l);
        if (valid && l == 0) {
            to[i * stride] = dist;
        }
    });
}

// A member and its distance; the farther wins, and of equal ones the first, as the CPU's strict > keeps it.
struct Far {
    double distance;
    int index;
};

struct Farther {
    __device__ Far operator()(const Far& a, const Far& b) const {
        return a.distance > b.distance || (a.distance == b.distance && a.index < b.index) ? a : b;
    }
};

using FarReduce = cub::BlockReduce<Far, kThreads>;
using CountReduce = cub::BlockReduce<int, kThreads>;
using Sums = OrderedSums<kThreads>;

// The first member farthest from `centre`, by the distances just measured (valid in thread 0).
__device__ int farthest(const float* dist, int count, int stride, typename FarReduce::TempStorage& storage) {
    Far best{-1.0, 0};
    for (int i = threadIdx.x; i < count; i += kThreads) {
        const double value = dist[static_cast<std::size_t>(i) * stride];
        if (value > best.distance) {
            best = {value, i};
        }
    }
    return FarReduce(storage).Reduce(best, Farther{}).index;
}

// Member i's distance to the centre of its side, for the energy after a step.
struct SideDistance {
    const float* dist;
    const signed char* side;
    __device__ double operator()(std::size_t i) const { return dist[2 * i + (side[i] == 1 ? 1 : 0)]; }
};

// Member i's distance to the mean, for the energy before.
struct MeanDistance {
    const float* dist;
    __device__ double operator()(std::size_t i) const { return dist[2 * i + 1]; }
};

__global__ void __launch_bounds__(kThreads) two_means_kernel(TwoMeansArgs a) {
    __shared__ union {
        typename FarReduce::TempStorage far;
        typename CountReduce::TempStorage count;
    } reduce;
    __shared__ typename Sums::TempStorage sums_storage;
    Sums sums(sums_storage);
    __shared__ int chosen[2];
    __shared__ int differ;
    __shared__ int moved;
    __shared__ unsigned size[2];
    const std::size_t t = a.first + blockIdx.x;  // list position
    const std::size_t start = a.offsets[t] - a.offsets[a.first];
    const Piece p{a.rows + start * a.d, static_cast<int>(a.offsets[t + 1] - a.offsets[t])};
    const int d = a.d;
    float* mean = a.means + t * d;
    float* left = a.centres + t * 2 * d;
    float* right = left + d;
    float* dist = a.distances + start * 2;
    signed char* side = a.sides + start;
    const int tid = threadIdx.x;
    if (tid == 0) {
        a.ok[t] = 0;
    }
    if (p.count < 2) {
        return;
    }
    for (int k = tid; k < d; k += kThreads) {
        double sum = 0.0;
#pragma unroll 8
        for (int i = 0; i < p.count; ++i) {
            sum += p.rows[static_cast<std::size_t>(i) * d + k];
        }
        mean[k] = static_cast<float>(sum / static_cast<double>(p.count));
    }
    __syncthreads();
    // The distances to the mean stay in the right slots until the Lloyd steps: `before` needs them.
    distances_to(p, mean, d, dist + 1, 2);
    __syncthreads();
    const int first = farthest(dist + 1, p.count, 2, reduce.far);
    if (tid == 0) {
        chosen[0] = first;
        differ = 0;
    }
    __syncthreads();
    for (int k = tid; k < d; k += kThreads) {
        left[k] = p.rows[static_cast<std::size_t>(chosen[0]) * d + k];
    }
    __syncthreads();
    distances_to(p, left, d, dist, 2);
    __syncthreads();
    const int second = farthest(dist, p.count, 2, reduce.far);
    if (tid == 0) {
        chosen[1] = second;
    }
    __syncthreads();
    for (int k = tid; k < d; k += kThreads) {
        right[k] = p.rows[static_cast<std::size_t>(chosen[1]) * d + k];
        if (right[k] != left[k]) {
            differ = 1;
        }
    }
    __syncthreads();
    if (differ == 0) {
        return;  // every member is the same point
    }
    const double before = sums.total(MeanDistance{dist}, static_cast<std::size_t>(p.count), 0.0);
    if (tid == 0) {
        a.sums[2 * t] = before;
    }
    for (int i = tid; i < p.count; i += kThreads) {
        side[i] = -1;
    }
    double after = 0.0;
    for (int step = 0; step <= kTwoMeansSteps; ++step) {
        __syncthreads();  // the centres (and before the first step, the sides) are settled
        distances_to(p, left, d, dist, 2);
        distances_to(p, right, d, dist + 1, 2);
        __syncthreads();
        // Each member to its nearer centre; the counts are integers, exact in any order.
        int changed = 0;
        int on_right = 0;
        for (int i = tid; i < p.count; i += kThreads) {
            const signed char s = dist[2 * i + 1] < dist[2 * i] ? 1 : 0;
            changed += s != side[i] ? 1 : 0;
            on_right += s;
            side[i] = s;
        }
        changed = CountReduce(reduce.count).Sum(changed);
        __syncthreads();
        on_right = CountReduce(reduce.count).Sum(on_right);
        if (tid == 0) {
            moved = changed;
            size[0] = static_cast<unsigned>(p.count - on_right);
            size[1] = static_cast<unsigned>(on_right);
        }
        __syncthreads();
        if (step == kTwoMeansSteps || moved == 0) {
            after = sums.total(SideDistance{dist, side}, static_cast<std::size_t>(p.count), 0.0);
            break;
        }
        for (int k = tid; k < d; k += kThreads) {
            double sum_left = 0.0;
            double sum_right = 0.0;
#pragma unroll 8
            for (int i = 0; i < p.count; ++i) {
                const float value = p.rows[static_cast<std::size_t>(i) * d + k];
                if (side[i] == 1) {
                    sum_right += value;
                } else {
                    sum_left += value;
                }
            }
            if (size[0] > 0) {
                left[k] = static_cast<float>(sum_left / static_cast<double>(size[0]));
            }
            if (size[1] > 0) {
                right[k] = static_cast<float>(sum_right / static_cast<double>(size[1]));
            }
        }
    }
    if (tid == 0) {
        a.sums[2 * t + 1] = after;
        a.ok[t] = 1;
    }
}

}  // namespace

void launch_two_means(const TwoMeansArgs& a, cudaStream_t stream) {
    if (a.count == 0) {
        return;
    }
    two_means_kernel<<<static_cast<unsigned>(a.count), kThreads, 0, stream>>>(a);
    check_launch("two_means_kernel", stream);
}

}  // namespace vlattice::cuda
