#include "reduce/robust_reduce.cuh"

#include "math/segments.cuh"
#include "math/warp_math.cuh"
#include "runtime/cuda_check.hpp"

#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>

namespace vlattice::cuda {

namespace {

constexpr int kThreads = 256;
// Members summed by one block into one partial row: few, as a block waits on memory once per
// kInFlight of them (256 members, 32 waits, left Fashion-MNIST's kernel at a third of the DRAM
// bandwidth: its full chunks outlasted the rest of the grid), but enough to amortise the block.
constexpr std::uint32_t kChunk = 64;
constexpr int kFinalizeThreads = 128;
constexpr int kFinalizeSlots = 8;
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

// The kept members of chunk b < item_offsets[m] of all anchors, into shared memory; returns how many.
__device__ inline int load_member_chunk(std::uint32_t b, const std::uint32_t* __restrict__ members,
                                        const std::uint32_t* __restrict__ offsets,
                                        const std::uint32_t* __restrict__ kept,
                                        const std::uint32_t* __restrict__ item_offsets, std::size_t m,
                                        std::uint32_t* chunk) {
    const std::size_t j = owning_anchor(item_offsets, m, b);
    const std::uint32_t begin = offsets[j] + (b - item_offsets[j]) * kChunk;
    return load_chunk(members, begin, min(begin + kChunk, offsets[j] + kept[j]), chunk);
}

// The chunk's kept distances, summed by the block's first warp; thread 0 stores them.
__device__ inline void sum_chunk_distance(const double* __restrict__ distance, const std::uint32_t* chunk, int size,
                                          double* out) {
    if (threadIdx.x < kWarp) {
        double sum = 0.0;
        for (int r = threadIdx.x; r < size; r += kWarp) {
            sum += distance[chunk[r]];
        }
        sum = warp_sum(sum);
        if (threadIdx.x == 0) {
            *out = sum;
        }
    }
}

// A block sums one chunk of up to kChunk kept members of one anchor: threads across the coordinates,
// kCount of them each (one 16-byte load per member where the rows allow), members in sorted order.
// Typed rows, so that the loads of several members are in flight together: the members are
// scattered rows, and with a branch on the row type per value, or one value per load, each thread
// waited on memory once per member and coordinate (226 us per call at Fashion-MNIST, 35 at
// 10,000 x 128). `points` are the rows from point `first` on: a chunk's members are in point order,
// so those of a streamed tile are the run [from, to) of them, and each coordinate's sum goes on from
// `start` (null: zero), adding the same values in the same order as one pass over all the points.
template <RowType kType, int kCount>
__device__ inline void sum_chunk_rows(const PointRows& points, std::uint32_t first, const std::uint32_t* chunk,
                                      int from, int to, int d, const double* start, double* out) {
    constexpr int kInFlight = 8;
    for (int k = threadIdx.x * kCount; k < d; k += blockDim.x * kCount) {
        double sum[kCount] = {};
        if (start != nullptr) {
#pragma unroll
            for (int v = 0; v < kCount; ++v) {
                if (k + v < d) {
                    sum[v] = start[k + v];
                }
            }
        }
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
                    sum[v] += static_cast<double>(values[q][v]);
                }
            }
        }
        for (; r < to; ++r) {
            float values[kCount];
            points.load<kType>(chunk[r] - first, k, values);
#pragma unroll
            for (int v = 0; v < kCount; ++v) {
                sum[v] += static_cast<double>(values[v]);
            }
        }
#pragma unroll
        for (int v = 0; v < kCount; ++v) {
            if (k + v < d) {
                out[k + v] = sum[v];
            }
        }
    }
}

// Held points: block b sums chunk b's rows and kept distances.
template <RowType kType, int kCount>
__global__ void member_sums_kernel(PointRows points, int d, const double* __restrict__ distance,
                                   const std::uint32_t* __restrict__ members, const std::uint32_t* __restrict__ offsets,
                                   const std::uint32_t* __restrict__ kept,
                                   const std::uint32_t* __restrict__ item_offsets, std::size_t m,
                                   double* __restrict__ partial_sums, double* __restrict__ partial_distance) {
    __shared__ std::uint32_t chunk[kChunk];
    const std::uint32_t b = blockIdx.x;
    // The grid is an upper bound on the number of chunks.
    if (b >= item_offsets[m]) {
        return;
    }
    const int size = load_member_chunk(b, members, offsets, kept, item_offsets, m, chunk);
    sum_chunk_distance(distance, chunk, size, partial_distance + b);
    sum_chunk_rows<kType, kCount>(points, 0, chunk, 0, size, d, nullptr, partial_sums + static_cast<std::size_t>(b) * d);
}

// Streamed points: block b sums chunk b's kept distances, which need no rows (once per reduce).
__global__ void chunk_distance_kernel(const double* __restrict__ distance, const std::uint32_t* __restrict__ members,
                                      const std::uint32_t* __restrict__ offsets, const std::uint32_t* __restrict__ kept,
                                      const std::uint32_t* __restrict__ item_offsets, std::size_t m,
                                      double* __restrict__ partial_distance) {
    __shared__ std::uint32_t chunk[kChunk];
    const std::uint32_t b = blockIdx.x;
    if (b >= item_offsets[m]) {
        return;
    }
    sum_chunk_distance(distance, chunk, load_member_chunk(b, members, offsets, kept, item_offsets, m, chunk),
                       partial_distance + b);
}

// Thread j: which of anchor j's chunks have kept members among the points [first, last) (kept
// members are in point order), and whether the last of them has members past `last`.
__global__ void tile_chunks_kernel(const std::uint32_t* __restrict__ members, const std::uint32_t* __restrict__ offsets,
                                   const std::uint32_t* __restrict__ kept, std::size_t m, std::uint32_t first,
                                   std::uint32_t last, ReduceArgs::TileSums tiles) {
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
    bool open = false;
    if (hi > lo) {
        const int first_chunk = lo / static_cast<int>(kChunk);
        const int last_chunk = (hi - 1) / static_cast<int>(kChunk);
        tiles.first_chunk[j] = static_cast<std::uint32_t>(first_chunk);
        count = static_cast<std::uint32_t>(last_chunk - first_chunk + 1);
        open = min((last_chunk + 1) * static_cast<int>(kChunk), keep) > hi;
    }
    tiles.chunk_counts[j] = count;
    tiles.left_open[j] = open ? 1u : 0u;
}

// Block s sums the tile's members of the s-th chunk it touches into its slot, going on from the
// anchor's open chunk where that chunk began in an earlier tile.
template <RowType kType, int kCount>
__global__ void tile_sums_kernel(PointRows points, std::uint32_t first, std::uint32_t last, int d,
                                 const std::uint32_t* __restrict__ members, const std::uint32_t* __restrict__ offsets,
                                 const std::uint32_t* __restrict__ kept, std::size_t m, ReduceArgs::TileSums tiles) {
    __shared__ std::uint32_t chunk[kChunk];
    const std::uint32_t s = blockIdx.x;
    if (s >= tiles.chunk_base[m]) {
        return;
    }
    const std::size_t j = owning_anchor(tiles.chunk_base, m, s);
    const std::uint32_t c = tiles.first_chunk[j] + (s - tiles.chunk_base[j]);
    const std::uint32_t begin = offsets[j] + c * kChunk;
    const int size = load_chunk(members, begin, min(begin + kChunk, offsets[j] + kept[j]), chunk);
    const int from = members_below(chunk, size, first);
    const int to = members_below(chunk, size, last);
    const double* start = from > 0 ? tiles.open + j * d : nullptr;
    sum_chunk_rows<kType, kCount>(points, first, chunk, from, to, d, start,
                                  tiles.slot_sums + static_cast<std::size_t>(s) * d);
}

// Block j adds the chunks the tile closed to the anchor's total, in order, and keeps the one it
// left open.
__global__ void __launch_bounds__(kFinalizeThreads)
    fold_tile_kernel(int d, ReduceArgs::TileSums tiles) {
    const std::size_t j = blockIdx.x;
    const std::uint32_t count = tiles.chunk_counts[j];
    if (count == 0) {
        return;
    }
    const std::uint32_t base = tiles.chunk_base[j];
    const std::uint32_t closed = count - tiles.left_open[j];
    for (int k = threadIdx.x; k < d; k += blockDim.x) {
        double total = tiles.totals[j * d + k];
        for (std::uint32_t s = base; s < base + closed; ++s) {
            total += tiles.slot_sums[static_cast<std::size_t>(s) * d + k];
        }
        tiles.totals[j * d + k] = total;
        if (closed < count) {
            tiles.open[j * d + k] = tiles.slot_sums[static_cast<std::size_t>(base + closed) * d + k];
        }
    }
}

// One block per anchor adds its chunk sums in order (or takes the total of a streamed reduce, the
// same additions), divides, and applies the parallel-axis theorem exactly like the CPU: variance =
// max(0, mean kept distance - ||mean - anchor||^2).
__global__ void __launch_bounds__(kFinalizeThreads)
    finalize_kernel(const double* __restrict__ partial_sums, const double* __restrict__ totals,
                    const double* __restrict__ partial_distance,
                    const std::uint32_t* __restrict__ item_offsets, const std::uint32_t* __restrict__ kept,
                    const float* __restrict__ anchors, int d, double* __restrict__ means,
                    double* __restrict__ variance) {
    __shared__ double shift_parts[kFinalizeThreads];
    const std::size_t j = blockIdx.x;
    const std::uint32_t keep = kept[j];
    if (keep == 0) {
        if (threadIdx.x == 0) {
            variance[j] = 0.0;
        }
        return;
    }
    const std::uint32_t first = item_offsets[j];
    const std::uint32_t last = item_offsets[j + 1];
    double shift = 0.0;
    // kFinalizeSlots of the thread's coordinates at a time, so that their loads of each chunk sum are
    // in flight together (one coordinate at a time, Fashion-MNIST's 784 waited seven times per chunk).
    for (int k0 = threadIdx.x; k0 < d; k0 += kFinalizeThreads * kFinalizeSlots) {
        double sum[kFinalizeSlots] = {};
        if (totals != nullptr) {
#pragma unroll
            for (int q = 0; q < kFinalizeSlots; ++q) {
                const int k = k0 + q * kFinalizeThreads;
                if (k < d) {
                    sum[q] = totals[j * d + k];
                }
            }
        }
        for (std::uint32_t item = first; totals == nullptr && item < last; ++item) {
            const double* chunk = partial_sums + static_cast<std::size_t>(item) * d;
#pragma unroll
            for (int q = 0; q < kFinalizeSlots; ++q) {
                const int k = k0 + q * kFinalizeThreads;
                if (k < d) {
                    sum[q] += chunk[k];
                }
            }
        }
#pragma unroll
        for (int q = 0; q < kFinalizeSlots; ++q) {
            const int k = k0 + q * kFinalizeThreads;
            if (k < d) {
                const double mean = sum[q] / static_cast<double>(keep);
                means[j * d + k] = mean;
                const double offset = mean - static_cast<double>(anchors[j * d + k]);
                shift += offset * offset;
            }
        }
    }
    shift_parts[threadIdx.x] = shift;
    __syncthreads();
    for (int half = kFinalizeThreads / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) {
            shift_parts[threadIdx.x] += shift_parts[threadIdx.x + half];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        double kept_distance = 0.0;
        for (std::uint32_t item = first; item < last; ++item) {
            kept_distance += partial_distance[item];
        }
        variance[j] = fmax(0.0, kept_distance / static_cast<double>(keep) - shift_parts[0]);
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

void launch_member_sums(const ReduceArgs& a, const std::uint32_t* ordered, const PointRows& points,
                        cudaStream_t stream) {
    const auto chunks = static_cast<unsigned>(max_member_chunks(a.n, a.m));
    with_member_loads(points, [&](auto type, auto count) {
        constexpr RowType kType = decltype(type)::value;
        constexpr int kCount = decltype(count)::value;
        member_sums_kernel<kType, kCount><<<chunks, member_threads(a.d, kCount), 0, stream>>>(
            points, a.d, a.distance, ordered, a.offsets, a.kept, a.item_offsets, a.m, a.partial_sums,
            a.partial_distance);
    });
    check_launch("member_sums_kernel", stream);
}

void launch_tile_sums(const ReduceArgs& a, const std::uint32_t* ordered, const MemberTile& tile, cudaStream_t stream) {
    const ReduceArgs::TileSums& t = a.tiles;
    const auto first = static_cast<std::uint32_t>(tile.first);
    const auto last = static_cast<std::uint32_t>(tile.first + tile.rows);
    if (tile.first == 0) {
        CUDA_CHECK(cudaMemsetAsync(t.totals, 0, a.m * a.d * sizeof(double), stream));
    }
    tile_chunks_kernel<<<blocks_for(a.m + 1, kThreads), kThreads, 0, stream>>>(ordered, a.offsets, a.kept, a.m, first,
                                                                                last, t);
    check_launch("tile_chunks_kernel", stream);
    std::size_t temp_bytes = a.temp_bytes;
    CUDA_CHECK(cub::DeviceScan::ExclusiveSum(a.temp, temp_bytes, t.chunk_counts, t.chunk_base, a.m + 1, stream));
    const std::size_t slots = tile_chunk_slots(tile.rows, a.m);
    if (slots > t.slots) {
        throw Error("cuda backend: a tile of " + std::to_string(tile.rows) + " rows needs " + std::to_string(slots) +
                    " chunk sums, more than the reduce's " + std::to_string(t.slots));
    }
    with_member_loads(tile.points, [&](auto type, auto count) {
        constexpr RowType kType = decltype(type)::value;
        constexpr int kCount = decltype(count)::value;
        tile_sums_kernel<kType, kCount><<<static_cast<unsigned>(slots), member_threads(a.d, kCount), 0, stream>>>(
            tile.points, first, last, a.d, ordered, a.offsets, a.kept, a.m, t);
    });
    check_launch("tile_sums_kernel", stream);
    fold_tile_kernel<<<static_cast<unsigned>(a.m), kFinalizeThreads, 0, stream>>>(a.d, t);
    check_launch("fold_tile_kernel", stream);
}

void launch_reduce_finalize(const ReduceArgs& a, const std::uint32_t* ordered, bool streamed, cudaStream_t stream) {
    if (streamed) {
        chunk_distance_kernel<<<static_cast<unsigned>(max_member_chunks(a.n, a.m)), kWarp, 0, stream>>>(
            a.distance, ordered, a.offsets, a.kept, a.item_offsets, a.m, a.partial_distance);
        check_launch("chunk_distance_kernel", stream);
    }
    finalize_kernel<<<static_cast<unsigned>(a.m), kFinalizeThreads, 0, stream>>>(
        streamed ? nullptr : a.partial_sums, streamed ? a.tiles.totals : nullptr, a.partial_distance, a.item_offsets,
        a.kept, a.anchors, a.d, a.means, a.variance);
    check_launch("finalize_kernel", stream);
}

}  // namespace vlattice::cuda
