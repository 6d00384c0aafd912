#include "point_distance.cuh"

#include "cuda_check.hpp"
#include "warp_math.cuh"

#include <cub/device/device_reduce.cuh>

namespace vlattice::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / kWarp;

__global__ void __launch_bounds__(kThreads)
    squared_norms_kernel(PointRows rows, std::size_t count, int d, float* __restrict__ norms,
                         unsigned* __restrict__ max_bits) {
    const int lane = threadIdx.x % kWarp;
    const std::size_t row = (static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
    if (row >= count) {
        return;
    }
    const float norm = static_cast<float>(warp_squared_norm(PointRow{rows, row}, d, lane));
    if (lane == 0) {
        norms[row] = norm;
        // Norms are >= 0, and the bits of non-negative floats order like the floats.
        if (max_bits != nullptr) {
            atomicMax(max_bits, __float_as_uint(norm));
        }
    }
}

// One warp walks kPointsPerDistanceWarp consecutive points in order; the block adds its warps' sums
// in order, so the block sums do not depend on scheduling.
template <RowType kType>
__global__ void __launch_bounds__(kThreads) point_distance_kernel(PointDistanceArgs args) {
    constexpr int kPerWarp = static_cast<int>(kPointsPerDistanceWarp);
    static_assert(kPointsPerDistanceBlock == kWarpsPerBlock * kPointsPerDistanceWarp && kPerWarp <= kWarp,
                  "one warp per kPointsPerDistanceWarp points");
    __shared__ double warp_sums[kWarpsPerBlock];
    const int lane = threadIdx.x % kWarp;
    const int warp = threadIdx.x / kWarp;
    const std::size_t first = static_cast<std::size_t>(blockIdx.x) * kPointsPerDistanceBlock +
                              static_cast<std::size_t>(warp) * kPerWarp;
    // Lane j reads point first + j's anchor and writes its results, so that those accesses are
    // coalesced: the warp's points share one load of ids and one store of each result.
    const std::size_t mine = first + lane;
    const bool valid = lane < kPerWarp && mine < args.n;
    const std::uint32_t my_anchor = first < args.n ? args.source[valid ? mine : first] : 0;  // a warp past the end reads nothing
    double my_distance = 0.0;
    double sum = 0.0;
    // Two points at a time, four strides of each (warp_squared_distances), so that their loads overlap;
    // past the end a slot repeats the warp's first point and is not counted. Four points at a time
    // ran slower (ncu at 1M x 128: 554 us per call against 483; the registers cut the warps in flight).
    constexpr int kAtOnce = 2;
    static_assert(kPerWarp % kAtOnce == 0, "whole rounds of kAtOnce points");
    for (int p0 = 0; p0 < kPerWarp && first + p0 < args.n; p0 += kAtOnce) {
        TypedPointRow<kType> xs[kAtOnce];
        FloatRow cs[kAtOnce];
#pragma unroll
        for (int q = 0; q < kAtOnce; ++q) {
            const std::size_t i = first + p0 + q < args.n ? first + p0 + q : first;
            const std::uint32_t anchor = __shfl_sync(kFullMask, my_anchor, p0 + q);
            xs[q] = TypedPointRow<kType>{args.points, i};
            cs[q] = FloatRow{args.anchors + static_cast<std::size_t>(anchor) * args.d};
        }
        double dist[kAtOnce];
        warp_squared_distances<kAtOnce>(xs, cs, args.d, lane, dist);
#pragma unroll
        for (int q = 0; q < kAtOnce; ++q) {
            if (first + p0 + q >= args.n) {
                break;
            }
            sum += dist[q];
            my_distance = lane == p0 + q ? dist[q] : my_distance;
        }
    }
    bool moved = false;
    if (valid) {
        if (args.distance != nullptr) {
            args.distance[mine] = my_distance;
        }
        if (args.assignment != nullptr) {
            moved = args.assignment[mine] != my_anchor;
            args.assignment[mine] = my_anchor;
        }
    }
    const unsigned changed = static_cast<unsigned>(__popc(__ballot_sync(kFullMask, moved)));
    if (lane == 0) {
        warp_sums[warp] = sum;
        if (changed > 0) {
            atomicAdd(args.changed, static_cast<unsigned long long>(changed));
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        double block = 0.0;
        for (int w = 0; w < kWarpsPerBlock; ++w) {
            block += warp_sums[w];
        }
        args.block_sums[blockIdx.x] = block;
    }
}

}  // namespace

void launch_squared_norms(const PointRows& rows, std::size_t count, int d, float* norms, unsigned* max_bits,
                          cudaStream_t stream) {
    if (count == 0) {
        return;
    }
    const auto blocks = static_cast<unsigned>(ceil_div(count, kWarpsPerBlock));
    squared_norms_kernel<<<blocks, kThreads, 0, stream>>>(rows, count, d, norms, max_bits);
    check_launch("squared_norms_kernel", stream);
}

void launch_point_distances(const PointDistanceArgs& args, cudaStream_t stream) {
    if (args.n == 0) {
        return;
    }
    const auto blocks = static_cast<unsigned>(distance_block_count(args.n));
    with_row_type(args.points.type, [&](auto type) {
        point_distance_kernel<decltype(type)::value><<<blocks, kThreads, 0, stream>>>(args);
    });
    check_launch("point_distance_kernel", stream);
}

std::size_t sum_temp_bytes(std::size_t count) {
    std::size_t bytes = 0;
    CUDA_CHECK(cub::DeviceReduce::Sum(nullptr, bytes, static_cast<const double*>(nullptr),
                                      static_cast<double*>(nullptr), count));
    return bytes;
}

void launch_sum(const double* values, std::size_t count, double* total, void* temp, std::size_t temp_bytes,
                cudaStream_t stream) {
    CUDA_CHECK(cub::DeviceReduce::Sum(temp, temp_bytes, values, total, count, stream));
}

}  // namespace vlattice::cuda
