#include "maintenance/gather_members.cuh"

#include "anchors/anchor_rows.cuh"
#include "math/segments.cuh"
#include "math/warp_math.cuh"
#include "runtime/cuda_check.hpp"

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>

namespace vlattice::cuda {

namespace {

constexpr int kThreads = 256;
constexpr std::uint32_t kUnlisted = 0xffffffffu;

unsigned blocks_for(std::size_t items) { return static_cast<unsigned>(ceil_div(items, kThreads)); }

__global__ void mark_listed_kernel(const std::uint32_t* __restrict__ listed, std::size_t count, std::size_t m,
                                   std::uint32_t* __restrict__ slot_of) {
    const std::size_t t = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (t < count && listed[t] < m) {
        slot_of[listed[t]] = static_cast<std::uint32_t>(t);
    }
}

// Points assigned to a listed anchor; points with no anchor yet (ids >= m) are nobody's.
struct IsListed {
    const std::uint32_t* assignment;
    const std::uint32_t* slot_of;
    std::size_t m;
    __device__ bool operator()(std::uint32_t i) const {
        const std::uint32_t a = assignment[i];
        return a < m && slot_of[a] != kUnlisted;
    }
};

__global__ void slot_keys_kernel(const std::uint32_t* __restrict__ members, std::size_t selected,
                                 const std::uint32_t* __restrict__ assignment,
                                 const std::uint32_t* __restrict__ slot_of, std::uint32_t* __restrict__ keys) {
    const std::size_t p = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (p < selected) {
        keys[p] = slot_of[assignment[members[p]]];
    }
}

// One block per listed anchor of [first, first + gridDim.x): its kept members' ids, packed from
// kept_offsets[t] - kept_offsets[first], for the gather of their rows. A block per anchor walking
// its rows a warp per row took 0.3 ms per call at Fashion-MNIST: the largest anchors' blocks waited
// on memory once per 8 rows.
__global__ void kept_members_kernel(const std::uint32_t* __restrict__ members, const std::uint32_t* __restrict__ offsets,
                                    const std::uint32_t* __restrict__ kept_offsets, std::size_t first,
                                    std::uint32_t* __restrict__ ids) {
    const std::size_t t = first + blockIdx.x;
    const std::uint32_t kept = kept_offsets[t + 1] - kept_offsets[t];
    std::uint32_t* const out = ids + (kept_offsets[t] - kept_offsets[first]);
    for (std::uint32_t r = threadIdx.x; r < kept; r += blockDim.x) {
        out[r] = members[offsets[t] + r];
    }
}

int key_bits(std::size_t count) {
    int bits = 1;
    while (bits < 32 && (std::size_t{1} << bits) < count) {
        ++bits;
    }
    return bits;
}

}  // namespace

std::size_t gather_members_temp_bytes(std::size_t n) {
    std::size_t select = 0;
    std::size_t sort = 0;
    CUDA_CHECK(cub::DeviceSelect::If(nullptr, select, thrust::counting_iterator<std::uint32_t>(0),
                                     static_cast<std::uint32_t*>(nullptr), static_cast<std::int64_t*>(nullptr),
                                     static_cast<std::int64_t>(n), IsListed{nullptr, nullptr, 0}));
    cub::DoubleBuffer<std::uint32_t> keys(nullptr, nullptr);
    cub::DoubleBuffer<std::uint32_t> values(nullptr, nullptr);
    CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, sort, keys, values, n));
    return select > sort ? select : sort;
}

void launch_select_listed(const GatherArgs& a, cudaStream_t stream) {
    CUDA_CHECK(cudaMemsetAsync(a.slot_of, 0xff, a.m * sizeof(std::uint32_t), stream));
    if (a.count > 0) {
        mark_listed_kernel<<<blocks_for(a.count), kThreads, 0, stream>>>(a.listed, a.count, a.m, a.slot_of);
        check_launch("mark_listed_kernel", stream);
    }
    std::size_t temp_bytes = a.temp_bytes;
    CUDA_CHECK(cub::DeviceSelect::If(a.temp, temp_bytes, thrust::counting_iterator<std::uint32_t>(0), a.members[0],
                                     a.selected, static_cast<std::int64_t>(a.n),
                                     IsListed{a.assignment, a.slot_of, a.m}, stream));
}

const std::uint32_t* launch_group_listed(const GatherArgs& a, std::size_t selected, cudaStream_t stream) {
    if (selected > 0) {
        slot_keys_kernel<<<blocks_for(selected), kThreads, 0, stream>>>(a.members[0], selected, a.assignment,
                                                                         a.slot_of, a.keys[0]);
        check_launch("slot_keys_kernel", stream);
    }
    // Radix sorting is stable: within a list position the members stay in point order.
    cub::DoubleBuffer<std::uint32_t> keys(a.keys[0], a.keys[1]);
    cub::DoubleBuffer<std::uint32_t> members(a.members[0], a.members[1]);
    std::size_t temp_bytes = a.temp_bytes;
    CUDA_CHECK(cub::DeviceRadixSort::SortPairs(a.temp, temp_bytes, keys, members, static_cast<int>(selected), 0,
                                               key_bits(a.count), stream));
    launch_segment_offsets(keys.Current(), selected, a.count, a.offsets, stream);
    return members.Current();
}

void launch_gather_rows(const GatherArgs& a, const std::uint32_t* grouped, const std::uint32_t* kept_offsets,
                        std::size_t first, std::size_t count, std::size_t row_count, float* rows,
                        cudaStream_t stream) {
    if (count == 0) {
        return;
    }
    kept_members_kernel<<<static_cast<unsigned>(count), kThreads, 0, stream>>>(grouped, a.offsets, kept_offsets,
                                                                              first, a.keys[0]);
    check_launch("kept_members_kernel", stream);
    launch_gather_rows(a.points, a.keys[0], row_count, a.d, rows, stream);
}

}  // namespace vlattice::cuda
