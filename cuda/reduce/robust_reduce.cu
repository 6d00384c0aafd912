#include "reduce/robust_reduce.cuh"

#include "math/segments.cuh"
#include "math/warp_math.cuh"
#include "runtime/cuda_check.hpp"

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <cuda/functional>

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>

namespace vlattice::cuda {

namespace {

constexpr int kThreads = 256;
// Members summed by one block into one row of atomics: few, as a block waits on memory once per
// kInFlight of them (256 members, 32 waits, left Fashion-MNIST's kernel at a third of the DRAM
// bandwidth: its full chunks outlasted the rest of the grid), but enough to amortise the block.
// At most kBatch, so that a chunk's values add exactly in doubles (fit/exact_sums.hpp).
constexpr std::uint32_t kChunk = 64;
static_assert(kChunk <= kBatch, "a chunk's grid values must add exactly in double");
constexpr int kGridThreads = 128;
constexpr int kFinalizeThreads = 128;
constexpr int kTrimThreads = 256;
constexpr int kDigitBits = 8;
constexpr int kDigits = 1 << kDigitBits;
static_assert(kDigits == kTrimThreads, "one radix bin per thread in the trim's scan");

__global__ void anchor_keys_kernel(const std::uint32_t* __restrict__ assignment, std::size_t n,
                                   std::uint32_t* __restrict__ keys, std::uint32_t* __restrict__ members) {
    const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) {
        keys[i] = assignment[i];
        members[i] = static_cast<std::uint32_t>(i);
    }
}

// keep = count - floor(trim * count), in double as on the CPU.
__global__ void keep_kernel(const std::uint32_t* __restrict__ offsets, std::size_t m, const double* __restrict__ trim_share,
                            std::uint32_t* __restrict__ count, std::uint32_t* __restrict__ kept,
                            std::uint32_t* __restrict__ item_counts) {
    const std::size_t j = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (j > m) {
        return;
    }
    if (j == m) {
        item_counts[m] = 0;  // the exclusive scan's last entry becomes the total
        return;
    }
    const std::uint32_t members = offsets[j + 1] - offsets[j];
    const double trim = *trim_share;
    const std::uint32_t keep = members - static_cast<std::uint32_t>(floor(trim * static_cast<double>(members)));
    count[j] = members;
    kept[j] = keep;
    item_counts[j] = (keep + kChunk - 1) / kChunk;
}

// Distances are >= 0, and the bits of non-negative doubles order like the doubles.
__device__ __forceinline__ std::uint64_t distance_bits(double distance) {
    return static_cast<std::uint64_t>(__double_as_longlong(distance));
}

// One block per anchor. Its members arrive in point order; the kept ones, the `keep` smallest by
// (distance, point) as the CPU orders them, leave first, still in point order, and the trimmed
// after them. A radix select on the distance bits, eight bits at a time, narrows down to the bin of
// the keep-th smallest distance: members below the bin are kept, and of those inside it the first
// `want` in point order (after all 64 bits the bin holds equal distances only; earlier, once `want`
// is the whole bin, it holds no member to drop).
__global__ void __launch_bounds__(kTrimThreads)
    trim_kernel(const double* __restrict__ distance, const std::uint32_t* __restrict__ members,
                const std::uint32_t* __restrict__ offsets, const std::uint32_t* __restrict__ kept,
                std::uint32_t* __restrict__ out) {
    using Scan = cub::BlockScan<std::uint32_t, kTrimThreads>;
    __shared__ typename Scan::TempStorage scan;
    __shared__ std::uint32_t bins[kDigits];
    __shared__ std::uint64_t chosen_prefix;
    __shared__ std::uint32_t chosen_want;
    __shared__ bool settled;
    const std::size_t j = blockIdx.x;
    const std::uint32_t begin = offsets[j];
    const std::uint32_t end = offsets[j + 1];
    const std::uint32_t keep = kept[j];
    if (keep == end - begin) {
        for (std::uint32_t p = begin + threadIdx.x; p < end; p += blockDim.x) {
            out[p] = members[p];
        }
        return;
    }

    std::uint64_t mask = 0;
    std::uint64_t prefix = 0;
    std::uint32_t want = keep;
    for (int shift = 64 - kDigitBits; shift >= 0; shift -= kDigitBits) {
        bins[threadIdx.x] = 0;
        __syncthreads();
        for (std::uint32_t p = begin + threadIdx.x; p < end; p += blockDim.x) {
            const std::uint64_t key = distance_bits(distance[members[p]]);
            if ((key & mask) == prefix) {
                atomicAdd(&bins[(key >> shift) & (kDigits - 1)], 1u);
            }
        }
        __syncthreads();
        const std::uint32_t in_bin = bins[threadIdx.x];
        std::uint32_t below = 0;
        Scan(scan).ExclusiveSum(in_bin, below);
        if (below < want && want <= below + in_bin) {
            chosen_prefix = prefix | (static_cast<std::uint64_t>(threadIdx.x) << shift);
            chosen_want = want - below;
            settled = want - below == in_bin;
        }
        __syncthreads();
        prefix = chosen_prefix;
        want = chosen_want;
        mask |= static_cast<std::uint64_t>(kDigits - 1) << shift;
        const bool done = settled;
        __syncthreads();  // everyone has read the choice before the next pass rewrites it
        if (done) {
            break;
        }
    }

    // Stable partition, a block-wide slice at a time.
    std::uint32_t kept_before = 0;
    std::uint32_t dropped_before = 0;
    std::uint32_t bin_before = 0;
    for (std::uint32_t base = begin; base < end; base += blockDim.x) {
        const std::uint32_t p = base + threadIdx.x;
        const bool valid = p < end;
        std::uint64_t masked = 0;
        if (valid) {
            masked = distance_bits(distance[members[p]]) & mask;
        }
        const bool inside = valid && masked == prefix;
        std::uint32_t bin_rank = 0;
        std::uint32_t bin_here = 0;
        Scan(scan).ExclusiveSum(inside ? 1u : 0u, bin_rank, bin_here);
        const bool keeps = valid && (masked < prefix || (inside && bin_before + bin_rank < want));
        __syncthreads();
        std::uint32_t kept_rank = 0;
        std::uint32_t kept_here = 0;
        Scan(scan).ExclusiveSum(keeps ? 1u : 0u, kept_rank, kept_here);
        if (valid) {
            // The valid threads are the slice's first ones, so the others before this one were dropped.
            const std::uint32_t slot = keeps ? kept_before + kept_rank : keep + dropped_before + threadIdx.x - kept_rank;
            out[begin + slot] = members[p];
        }
        const std::uint32_t slice = end - base < blockDim.x ? end - base : blockDim.x;
        kept_before += kept_here;
        dropped_before += slice - kept_here;
        bin_before += bin_here;
        __syncthreads();
    }
}

// The anchor owning chunk b < item_offsets[m]: the last j with item_offsets[j] <= b (it has at least
// one chunk). Each round a warp reads kWarp evenly spaced offsets of the range left and keeps the
// stretch after the last one <= b: log32(m) waits on memory instead of log2(m).
__device__ std::size_t owning_anchor(const std::uint32_t* __restrict__ item_offsets, std::size_t m, std::uint32_t b) {
    const int lane = threadIdx.x % kWarp;
    std::size_t lo = 0;  // item_offsets[lo] <= b < item_offsets[hi]
    std::size_t hi = m;
    while (hi - lo > 1) {
        const std::size_t step = ceil_div(hi - lo, kWarp);
        const std::size_t probe = lo + lane * step;
        // The offsets do not decrease, so the lanes at or below b are a prefix, lane 0 (lo) among them.
        const unsigned below = __ballot_sync(kFullMask, probe < hi && item_offsets[probe] <= b);
        lo += static_cast<std::size_t>(kWarp - 1 - __clz(below)) * step;
        hi = min(hi, lo + step);
    }
    return lo;
}

// How many of a chunk's `size` members, in point order, lie below point `row`.
__device__ inline int members_below(const std::uint32_t* chunk, int size, std::uint32_t row) {
    int lo = 0;
    int hi = size;
    while (lo < hi) {
        const int mid = (lo + hi) / 2;
        if (chunk[mid] < row) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

// The members [begin, end) of the grouped list, one chunk, into shared memory.
__device__ inline int load_chunk(const std::uint32_t* __restrict__ members, std::uint32_t begin, std::uint32_t end,
                                 std::uint32_t* chunk) {
    const int size = static_cast<int>(end - begin);
    for (int r = threadIdx.x; r < size; r += blockDim.x) {
        chunk[r] = members[begin + r];
    }
    __syncthreads();
    return size;
}

// Block j: the largest of anchor j's kept distances, a maximum, which any order of the members gives.
__global__ void __launch_bounds__(kGridThreads)
    farthest_kernel(const double* __restrict__ distance, const std::uint32_t* __restrict__ members,
                    const std::uint32_t* __restrict__ offsets, const std::uint32_t* __restrict__ kept,
                    unsigned long long* __restrict__ farthest) {
    using Reduce = cub::BlockReduce<double, kGridThreads>;
    __shared__ typename Reduce::TempStorage storage;
    const std::size_t j = blockIdx.x;
    const std::uint32_t begin = offsets[j];
    double far = 0.0;
    for (std::uint32_t p = begin + threadIdx.x; p < begin + kept[j]; p += blockDim.x) {
        far = fmax(far, distance[members[p]]);
    }
    far = Reduce(storage).Reduce(far, ::cuda::maximum<double>{});
    if (threadIdx.x == 0) {
        farthest[j] = distance_bits(far);
    }
}

// Block j: anchor j's two grids from its largest coordinate and largest kept distance (as the CPU
// builds them), the sum of its kept distances on the distance grid, and its coordinate sums zeroed
// for the member sums to add into. A grid outside double's range marks the reduce stray.
__global__ void __launch_bounds__(kGridThreads)
    grids_kernel(const float* __restrict__ anchors, int d, const double* __restrict__ distance,
                 const std::uint32_t* __restrict__ members, const std::uint32_t* __restrict__ offsets,
                 const std::uint32_t* __restrict__ kept, const unsigned long long* __restrict__ farthest,
                 std::size_t m, SumGrid* __restrict__ grids, unsigned long long* __restrict__ sums,
                 unsigned* __restrict__ stray) {
    __shared__ union {
        typename cub::BlockReduce<double, kGridThreads>::TempStorage largest;
        typename cub::BlockReduce<long long, kGridThreads>::TempStorage sum;
    } storage;
    __shared__ SumGrid distance_steps;
    const std::size_t j = blockIdx.x;
    const std::uint32_t keep = kept[j];
    double largest = 0.0;
    for (int k = threadIdx.x; k < d; k += blockDim.x) {
        sums[j * d + k] = 0;
        largest = fmax(largest, fabs(static_cast<double>(anchors[j * d + k])));
    }
    largest = cub::BlockReduce<double, kGridThreads>(storage.largest).Reduce(largest, ::cuda::maximum<double>{});
    if (threadIdx.x == 0) {
        const double far = __longlong_as_double(static_cast<long long>(farthest[j]));
        grids[j] = grid_of(coordinate_bound(largest, far), keep);
        distance_steps = grids[m + j] = grid_of(distance_bound(far), keep);
        // frexp of an infinite bound gives an ordinary exponent: a distance or coordinate that is
        // not finite marks the reduce stray too, as on the CPU.
        if (keep > 0 && !(isfinite(far) && isfinite(largest) && grid_in_range(grids[j]) &&
                          grid_in_range(distance_steps))) {
            atomicOr(stray, 1u);
        }
    }
    __syncthreads();
    // Each value is at most 2^P and the keep of them add within 2^61 (exact_sums.hpp).
    long long sum = 0;
    const std::uint32_t begin = offsets[j];
    for (std::uint32_t p = begin + threadIdx.x; p < begin + keep; p += blockDim.x) {
        sum += static_cast<long long>(on_grid(distance[members[p]], distance_steps));
    }
    sum = cub::BlockReduce<long long, kGridThreads>(storage.sum).Sum(sum);
    if (threadIdx.x == 0) {
        sums[m * d + j] = static_cast<unsigned long long>(sum);
    }
}

// A block adds one chunk of up to kChunk kept members of one anchor to the anchor's sums: threads
// across the coordinates, kCount of them each (one 16-byte load per member where the rows allow).
// Typed rows, so that the loads of several members are in flight together: the members are
// scattered rows, and with a branch on the row type per value, or one value per load, each thread
// waited on memory once per member and coordinate. `points` are the rows from point `first` on: a
// chunk's members are in point order, so those of a streamed tile are the run [from, to) of them.
// The chunk's values on the grid add exactly in doubles; the integer sums go into the anchor's
// with atomics (in two's complement), whose result does not depend on their order.
template <RowType kType, int kCount>
__device__ inline void add_chunk_rows(const PointRows& points, std::uint32_t first, const std::uint32_t* chunk,
                                      int from, int to, int d, const SumGrid& grid,
                                      unsigned long long* __restrict__ sums, unsigned* __restrict__ stray) {
    constexpr int kInFlight = 8;
    // The bound of exact_sums.hpp: a sum past it would come from a row farther from its anchor
    // than its distance says.
    const double most = grid.limit * static_cast<double>(to - from);
    for (int k = threadIdx.x * kCount; k < d; k += blockDim.x * kCount) {
        double sum[kCount] = {};
        int r = from;
        for (; r + kInFlight <= to; r += kInFlight) {
            float values[kInFlight][kCount];
#pragma unroll
            for (int q = 0; q < kInFlight; ++q) {
                points.load<kType>(chunk[r + q] - first, k, values[q]);
            }
#pragma unroll
            for (int q = 0; q < kInFlight; ++q) {
#pragma unroll
                for (int v = 0; v < kCount; ++v) {
                    sum[v] += on_grid(values[q][v], grid);
                }
            }
        }
        for (; r < to; ++r) {
            float values[kCount];
            points.load<kType>(chunk[r] - first, k, values);
#pragma unroll
            for (int v = 0; v < kCount; ++v) {
                sum[v] += on_grid(values[v], grid);
            }
        }
#pragma unroll
        for (int v = 0; v < kCount; ++v) {
            if (k + v < d && sum[v] != 0.0) {
                if (fabs(sum[v]) > most) {
                    atomicOr(stray, 1u);
                }
                atomicAdd(sums + k + v, static_cast<unsigned long long>(static_cast<long long>(sum[v])));
            }
        }
    }
}

// Held points: block b adds chunk b's rows.
template <RowType kType, int kCount>
__global__ void member_sums_kernel(PointRows points, int d, const std::uint32_t* __restrict__ members,
                                   const std::uint32_t* __restrict__ offsets, const std::uint32_t* __restrict__ kept,
                                   const std::uint32_t* __restrict__ item_offsets, std::size_t m,
                                   const SumGrid* __restrict__ grids, unsigned long long* __restrict__ sums,
                                   unsigned* __restrict__ stray) {
    __shared__ std::uint32_t chunk[kChunk];
    const std::uint32_t b = blockIdx.x;
    // The grid is an upper bound on the number of chunks.
    if (b >= item_offsets[m]) {
        return;
    }
    const std::size_t j = owning_anchor(item_offsets, m, b);
    const std::uint32_t begin = offsets[j] + (b - item_offsets[j]) * kChunk;
    const int size = load_chunk(members, begin, min(begin + kChunk, offsets[j] + kept[j]), chunk);
    add_chunk_rows<kType, kCount>(points, 0, chunk, 0, size, d, grids[j], sums + j * d, stray);
}

// Thread j: which of anchor j's chunks have kept members among the points [first, last) (kept
// members are in point order).
__global__ void tile_chunks_kernel(const std::uint32_t* __restrict__ members, const std::uint32_t* __restrict__ offsets,
                                   const std::uint32_t* __restrict__ kept, std::size_t m, std::uint32_t first,
                                   std::uint32_t last, ReduceArgs::TileChunks tiles) {
    const std::size_t j = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (j > m) {
        return;
    }
    if (j == m) {
        tiles.chunk_counts[m] = 0;  // the exclusive scan's last entry becomes the total
        return;
    }
    const std::uint32_t* segment = members + offsets[j];
    const int keep = static_cast<int>(kept[j]);
    const int lo = members_below(segment, keep, first);
    const int hi = members_below(segment, keep, last);
    std::uint32_t count = 0;
    if (hi > lo) {
        const int first_chunk = lo / static_cast<int>(kChunk);
        tiles.first_chunk[j] = static_cast<std::uint32_t>(first_chunk);
        count = static_cast<std::uint32_t>((hi - 1) / static_cast<int>(kChunk) - first_chunk + 1);
    }
    tiles.chunk_counts[j] = count;
}

// Block s adds the tile's members of the s-th chunk it touches.
template <RowType kType, int kCount>
__global__ void tile_sums_kernel(PointRows points, std::uint32_t first, std::uint32_t last, int d,
                                 const std::uint32_t* __restrict__ members, const std::uint32_t* __restrict__ offsets,
                                 const std::uint32_t* __restrict__ kept, std::size_t m, ReduceArgs::TileChunks tiles,
                                 const SumGrid* __restrict__ grids, unsigned long long* __restrict__ sums,
                                 unsigned* __restrict__ stray) {
    __shared__ std::uint32_t chunk[kChunk];
    const std::uint32_t s = blockIdx.x;
    if (s >= tiles.chunk_base[m]) {
        return;
    }
    const std::size_t j = owning_anchor(tiles.chunk_base, m, s);
    const std::uint32_t c = tiles.first_chunk[j] + (s - tiles.chunk_base[j]);
    const std::uint32_t begin = offsets[j] + c * kChunk;
    const int size = load_chunk(members, begin, min(begin + kChunk, offsets[j] + kept[j]), chunk);
    add_chunk_rows<kType, kCount>(points, first, chunk, members_below(chunk, size, first),
                                  members_below(chunk, size, last), d, grids[j], sums + j * d, stray);
}

// Block j divides anchor j's sums by its kept count, and applies the parallel-axis theorem with
// the CPU's roundings in the CPU's order: variance = max(0, mean kept distance - ||mean - anchor||^2),
// the squared offset added coordinate by coordinate on one thread.
__global__ void __launch_bounds__(kFinalizeThreads)
    finalize_kernel(const unsigned long long* __restrict__ sums, const SumGrid* __restrict__ grids,
                    const std::uint32_t* __restrict__ kept, const float* __restrict__ anchors, std::size_t m, int d,
                    double* __restrict__ means, double* __restrict__ variance) {
    const std::size_t j = blockIdx.x;
    const std::uint32_t keep = kept[j];
    if (keep == 0) {
        if (threadIdx.x == 0) {
            variance[j] = 0.0;
        }
        return;
    }
    const double members = static_cast<double>(keep);
    const SumGrid grid = grids[j];
    double* mean = means + j * d;
    for (int k = threadIdx.x; k < d; k += blockDim.x) {
        mean[k] = __ddiv_rn(from_grid(static_cast<long long>(sums[j * d + k]), grid), members);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        const float* anchor = anchors + j * d;
        double shift = 0.0;
#pragma unroll 8
        for (int k = 0; k < d; ++k) {
            const double offset = __dsub_rn(mean[k], static_cast<double>(anchor[k]));
            shift = __dadd_rn(shift, __dmul_rn(offset, offset));
        }
        const double spread = __ddiv_rn(from_grid(static_cast<long long>(sums[m * d + j]), grids[m + j]), members);
        variance[j] = fmax(0.0, __dsub_rn(spread, shift));
    }
}

// Bits that hold every anchor id below m (at least one: the sort needs a non-empty bit range).
int anchor_bits(std::size_t m) {
    int bits = 1;
    while (bits < 32 && (std::size_t{1} << bits) < m) {
        ++bits;
    }
    return bits;
}

unsigned blocks_for(std::size_t count, int threads) {
    return static_cast<unsigned>(ceil_div(count, static_cast<std::size_t>(threads)));
}

// Threads across the coordinates, `count` each: one warp for short rows, up to eight for long ones.
int member_threads(int d, int count) {
    const int threads = (d + count - 1) / count;
    return std::clamp((threads + kWarp - 1) / kWarp * kWarp, kWarp, 8 * kWarp);
}

// Calls launch(type, count) with the rows' type and the values a member-sum thread loads at once
// (a 16-byte load's worth where the rows allow, else one), both as integral constants.
template <class Launch>
void with_member_loads(const PointRows& points, Launch launch) {
    const bool by_16 = points.loads_by_16();
    with_row_type(points.type, [&](auto type) {
        constexpr RowType kType = decltype(type)::value;
        if (by_16) {
            launch(type, std::integral_constant<int, kValuesPerLoad<kType>>{});
        } else {
            launch(type, std::integral_constant<int, 1>{});
        }
    });
}

}  // namespace

// floor(trim * count) grows with count, so when it is 0 for n it is 0 for every anchor, and the point
// order within each anchor does not matter.
bool trims_any(double trim, std::size_t n) {
    return std::floor(trim * static_cast<double>(n)) > 0.0;
}

std::size_t max_member_chunks(std::size_t n, std::size_t m) {
    return ceil_div(n, kChunk) + m;
}

std::size_t robust_reduce_temp_bytes(std::size_t n, std::size_t m) {
    cub::DoubleBuffer<std::uint32_t> anchor_keys(nullptr, nullptr);
    cub::DoubleBuffer<std::uint32_t> members(nullptr, nullptr);
    std::size_t by_anchor = 0;
    std::size_t scan = 0;
    CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, by_anchor, anchor_keys, members, n));
    CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, scan, static_cast<const std::uint32_t*>(nullptr),
                                             static_cast<std::uint32_t*>(nullptr), m + 1));
    return std::max(by_anchor, scan);
}

const std::uint32_t* launch_reduce_groups(const ReduceArgs& a, cudaStream_t stream) {
    cub::DoubleBuffer<std::uint32_t> anchor_keys(a.anchor_keys[0], a.anchor_keys[1]);
    cub::DoubleBuffer<std::uint32_t> members(a.members[0], a.members[1]);
    // Stable, so each anchor's members stay in point order.
    anchor_keys_kernel<<<blocks_for(a.n, kThreads), kThreads, 0, stream>>>(a.assignment, a.n, anchor_keys.Current(),
                                                                            members.Current());
    check_launch("anchor_keys_kernel", stream);
    std::size_t temp_bytes = a.temp_bytes;
    CUDA_CHECK(cub::DeviceRadixSort::SortPairs(a.temp, temp_bytes, anchor_keys, members, a.n, 0, anchor_bits(a.m),
                                               stream));

    launch_segment_offsets(anchor_keys.Current(), a.n, a.m, a.offsets, stream);
    keep_kernel<<<blocks_for(a.m + 1, kThreads), kThreads, 0, stream>>>(a.offsets, a.m, a.trim, a.count, a.kept,
                                                                         a.item_counts);
    check_launch("keep_kernel", stream);
    const std::uint32_t* ordered = members.Current();
    if (a.trims) {
        trim_kernel<<<static_cast<unsigned>(a.m), kTrimThreads, 0, stream>>>(a.distance, members.Current(), a.offsets,
                                                                             a.kept, members.Alternate());
        check_launch("trim_kernel", stream);
        ordered = members.Alternate();
    }
    temp_bytes = a.temp_bytes;
    CUDA_CHECK(cub::DeviceScan::ExclusiveSum(a.temp, temp_bytes, a.item_counts, a.item_offsets, a.m + 1, stream));
    return ordered;
}

std::size_t tile_chunk_slots(std::size_t rows, std::size_t m) {
    return ceil_div(rows, kChunk) + 2 * std::min(m, rows);
}

void launch_reduce_grids(const ReduceArgs& a, const std::uint32_t* ordered, cudaStream_t stream) {
    CUDA_CHECK(cudaMemsetAsync(a.stray, 0, sizeof(unsigned), stream));
    const auto anchors = static_cast<unsigned>(a.m);
    farthest_kernel<<<anchors, kGridThreads, 0, stream>>>(a.distance, ordered, a.offsets, a.kept, a.farthest);
    check_launch("farthest_kernel", stream);
    grids_kernel<<<anchors, kGridThreads, 0, stream>>>(a.anchors, a.d, a.distance, ordered, a.offsets, a.kept,
                                                       a.farthest, a.m, a.grids, a.sums, a.stray);
    check_launch("grids_kernel", stream);
}

void launch_member_sums(const ReduceArgs& a, const std::uint32_t* ordered, const PointRows& points,
                        cudaStream_t stream) {
    const auto chunks = static_cast<unsigned>(max_member_chunks(a.n, a.m));
    with_member_loads(points, [&](auto type, auto count) {
        constexpr RowType kType = decltype(type)::value;
        constexpr int kCount = decltype(count)::value;
        member_sums_kernel<kType, kCount><<<chunks, member_threads(a.d, kCount), 0, stream>>>(
            points, a.d, ordered, a.offsets, a.kept, a.item_offsets, a.m, a.grids, a.sums, a.stray);
    });
    check_launch("member_sums_kernel", stream);
}

void launch_tile_sums(const ReduceArgs& a, const std::uint32_t* ordered, const MemberTile& tile, cudaStream_t stream) {
    const ReduceArgs::TileChunks& t = a.tiles;
    const auto first = static_cast<std::uint32_t>(tile.first);
    const auto last = static_cast<std::uint32_t>(tile.first + tile.rows);
    tile_chunks_kernel<<<blocks_for(a.m + 1, kThreads), kThreads, 0, stream>>>(ordered, a.offsets, a.kept, a.m, first,
                                                                                last, t);
    check_launch("tile_chunks_kernel", stream);
    std::size_t temp_bytes = a.temp_bytes;
    CUDA_CHECK(cub::DeviceScan::ExclusiveSum(a.temp, temp_bytes, t.chunk_counts, t.chunk_base, a.m + 1, stream));
    const auto slots = static_cast<unsigned>(tile_chunk_slots(tile.rows, a.m));
    with_member_loads(tile.points, [&](auto type, auto count) {
        constexpr RowType kType = decltype(type)::value;
        constexpr int kCount = decltype(count)::value;
        tile_sums_kernel<kType, kCount><<<slots, member_threads(a.d, kCount), 0, stream>>>(
            tile.points, first, last, a.d, ordered, a.offsets, a.kept, a.m, t, a.grids, a.sums, a.stray);
    });
    check_launch("tile_sums_kernel", stream);
}

void launch_reduce_finalize(const ReduceArgs& a, cudaStream_t stream) {
    finalize_kernel<<<static_cast<unsigned>(a.m), kFinalizeThreads, 0, stream>>>(a.sums, a.grids, a.kept, a.anchors,
                                                                                 a.m, a.d, a.means, a.variance);
    check_launch("finalize_kernel", stream);
}

}  // namespace vlattice::cuda
