#include "points/point_distance.cuh"

#include "math/warp_math.cuh"
#include "runtime/cuda_check.hpp"

#include <cub/device/device_reduce.cuh>

#include <cstdint>

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

// Slices of rows that each lane has in flight per step of sliced_distances. A slice is what a warp
// reads with one 16-byte load per lane: kWarp * kValuesPerLoad coordinates of a point, and the same
// coordinates of its anchor in one or two 16-byte loads.
constexpr int kSlotsPerLane = 4;
template <RowType kType>
constexpr int kSliceValues = kWarp * kValuesPerLoad<kType>;

// Slices of a row of d coordinates.
inline int slice_count(RowType type, int d) {
    const int values = kWarp * values_per_load(type);
    return (d + values - 1) / values;
}

__device__ __forceinline__ float lane_of(const float4& v, int i) {
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// ||x_q - c_q||^2 in double for kAtOnce points with 16-byte loads (rows that loads_by_16(), anchors
// of d % 4 == 0 floats): each step loads kSlotsPerLane slices, kSlotsPerLane / kAtOnce per point,
// before it adds any, so that a Fashion-MNIST row (four slices of float16) costs one wait instead of
// the seven of warp_squared_distances. Each lane adds its coordinates in increasing k, and every
// lane returns the same sums.
template <RowType kType, int kAtOnce>
__device__ __forceinline__ void sliced_distances(const PointRows& points, const std::size_t (&rows)[kAtOnce],
                                                 const float* const (&anchors)[kAtOnce], int d, int lane,
                                                 double (&out)[kAtOnce]) {
    constexpr int kValues = kValuesPerLoad<kType>;
    constexpr int kAnchorLoads = kValues / 4;
    constexpr int kPer = kSlotsPerLane / kAtOnce;
    double sum[kAtOnce];
#pragma unroll
    for (int q = 0; q < kAtOnce; ++q) {
        sum[q] = 0.0;
    }
    for (int s0 = 0; s0 * kSliceValues<kType> < d; s0 += kPer) {
        uint4 x_raw[kAtOnce][kPer] = {};
        float4 c_raw[kAtOnce][kPer][kAnchorLoads] = {};
#pragma unroll
        for (int q = 0; q < kAtOnce; ++q) {
#pragma unroll
            for (int u = 0; u < kPer; ++u) {
                const int k = (s0 + u) * kSliceValues<kType> + lane * kValues;
                if (k < d) {
                    x_raw[q][u] = points.load_16<kType>(rows[q], k);
#pragma unroll
                    for (int a = 0; a < kAnchorLoads; ++a) {
                        if (k + 4 * a < d) {
                            c_raw[q][u][a] = __ldg(reinterpret_cast<const float4*>(anchors[q] + k) + a);
                        }
                    }
                }
            }
        }
#pragma unroll
        for (int q = 0; q < kAtOnce; ++q) {
#pragma unroll
            for (int u = 0; u < kPer; ++u) {
                const int k = (s0 + u) * kSliceValues<kType> + lane * kValues;
                float x[kValues];
                points.unpack<kType>(x_raw[q][u], x);
#pragma unroll
                for (int v = 0; v < kValues; ++v) {
                    if (k + v < d) {
                        const double diff = static_cast<double>(x[v]) - static_cast<double>(lane_of(c_raw[q][u][v / 4], v % 4));
                        sum[q] = fma(diff, diff, sum[q]);
                    }
                }
            }
        }
    }
#pragma unroll
    for (int q = 0; q < kAtOnce; ++q) {
        out[q] = warp_sum(sum[q]);
    }
}

// One warp walks kPointsPerDistanceWarp consecutive points in order, kAtOnce at a time; the block
// adds its warps' sums in order, so the block sums do not depend on scheduling. kSliced: through
// sliced_distances; otherwise (rows or anchors that 16-byte loads do not fit) through
// warp_squared_distances, two points at a time.
template <RowType kType, int kAtOnce, bool kSliced>
__global__ void __launch_bounds__(kThreads) point_distance_kernel(PointDistanceArgs args) {
    constexpr int kPerWarp = static_cast<int>(kPointsPerDistanceWarp);
    static_assert(kPointsPerDistanceBlock == kWarpsPerBlock * kPointsPerDistanceWarp && kPerWarp <= kWarp,
                  "one warp per kPointsPerDistanceWarp points");
    static_assert(kPerWarp % kAtOnce == 0 && kSlotsPerLane % kAtOnce == 0, "whole rounds of kAtOnce points");
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
    // Past the end a slot repeats the warp's first point and is not counted.
    for (int p0 = 0; p0 < kPerWarp && first + p0 < args.n; p0 += kAtOnce) {
        std::size_t rows[kAtOnce];
        const float* anchors[kAtOnce];
#pragma unroll
        for (int q = 0; q < kAtOnce; ++q) {
            rows[q] = first + p0 + q < args.n ? first + p0 + q : first;
            anchors[q] = args.anchors + static_cast<std::size_t>(__shfl_sync(kFullMask, my_anchor, p0 + q)) * args.d;
        }
        double dist[kAtOnce];
        if constexpr (kSliced) {
            sliced_distances<kType, kAtOnce>(args.points, rows, anchors, args.d, lane, dist);
        } else {
            TypedPointRow<kType> xs[kAtOnce];
            FloatRow cs[kAtOnce];
#pragma unroll
            for (int q = 0; q < kAtOnce; ++q) {
                xs[q] = TypedPointRow<kType>{args.points, rows[q]};
                cs[q] = FloatRow{anchors[q]};
            }
            warp_squared_distances<kAtOnce>(xs, cs, args.d, lane, dist);
        }
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
    const bool sliced = args.points.loads_by_16() && args.d % 4 == 0 &&
                        reinterpret_cast<std::uintptr_t>(args.anchors) % 16 == 0;
    // As many points per step as fill the lanes' slots: one of three or more slices, two of two, four of one.
    const int slices = slice_count(args.points.type, args.d);
    with_row_type(args.points.type, [&](auto type) {
        constexpr RowType kType = decltype(type)::value;
        const auto kernel = !sliced      ? point_distance_kernel<kType, 2, false>
                            : slices >= 3 ? point_distance_kernel<kType, 1, true>
                            : slices == 2 ? point_distance_kernel<kType, 2, true>
                                          : point_distance_kernel<kType, 4, true>;
        kernel<<<blocks, kThreads, 0, stream>>>(args);
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
