// Hopper's tensor memory accelerator as the assign kernels use it: one thread copies a box of 16-bit
// rows (64 values, 128 bytes, by up to 256 rows) from global to shared memory in the 128-byte swizzled
// layout that wgmma reads, and an mbarrier counts the bytes in; consumers wait on the barrier's phase
// instead of on block-wide barriers. Rows and values past the array's end arrive as zeros.
// Needs sm_90.
#pragma once

#include "math/wgmma.cuh"

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace vlattice::cuda {

constexpr int kBoxValues = 64;  // 16-bit values per box row: one 128-byte swizzle span
constexpr unsigned kSwizzleAtom = 1024;  // bytes of 8 swizzled rows; boxes start at multiples of it

// The map of a rows x stride array of 16-bit values for boxes of box_rows x kBoxValues (host only;
// throws Error, naming `what`, where the driver refuses it).
CUtensorMap row_box_map(const std::uint16_t* rows, std::size_t count, int stride, int box_rows, const char* what);

// A wgmma descriptor for rows of 128 swizzled bytes starting at `address`, 8-row groups 1024 bytes
// apart; the start may move along a row by multiples of 32 bytes (k-steps) within its atom.
__device__ __forceinline__ std::uint64_t swizzled_descriptor(unsigned address) {
    return static_cast<std::uint64_t>((address & 0x3ffff) >> 4) | std::uint64_t{1} << 16 |
           static_cast<std::uint64_t>(kSwizzleAtom >> 4) << 32 | std::uint64_t{1} << 62;
}

__device__ __forceinline__ void barrier_init(std::uint64_t* barrier, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(shared_address(barrier)), "r"(count));
}

// Makes the initialised barriers visible to the async proxy (the copies) and the other threads,
// before the block-wide barrier that follows.
__device__ __forceinline__ void barrier_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }

// The producer's arrival, announcing `bytes` of copies that complete the phase.
__device__ __forceinline__ void barrier_expect(std::uint64_t* barrier, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_address(barrier)), "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void barrier_arrive(std::uint64_t* barrier) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(shared_address(barrier)) : "memory");
}

// Returns once the phase of parity `parity` has completed.
__device__ __forceinline__ void barrier_wait(std::uint64_t* barrier, unsigned parity) {
    asm volatile(
        "{\n.reg .pred done;\nwait:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra wait;\n}\n" ::"r"(shared_address(barrier)),
        "r"(parity)
        : "memory");
}

// The box at (value k, row) of `map` into shared memory at `to`, counted on `barrier`.
__device__ __forceinline__ void box_load(unsigned to, const CUtensorMap* map, int k, int row, std::uint64_t* barrier) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
            to),
        "l"(map), "r"(k), "r"(row), "r"(shared_address(barrier))
        : "memory");
}

// Thread block clusters (fast_assign_single.cu's pairs, two_means.cu's blocks per anchor). A box
// multicast lands at the same shared address in every block of `blocks` (a mask of cluster ranks)
// and counts its bytes on the barrier at the same address in each.
__device__ __forceinline__ void box_load_multicast(unsigned to, const CUtensorMap* map, int k, int row,
                                                   std::uint64_t* barrier, std::uint16_t blocks) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(
            to),
        "l"(map), "r"(k), "r"(row), "r"(shared_address(barrier)), "h"(blocks)
        : "memory");
}

// The cluster helpers are built for every architecture (two_means.cu runs without clusters before
// sm_90) and trap there: the runtime never launches a cluster on such a GPU.
__device__ __forceinline__ unsigned cluster_rank() {
#if __CUDA_ARCH__ >= 900
    unsigned rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    return rank;
#else
    __trap();
    return 0;
#endif
}

// An arrival on the barrier at this block's address of `barrier` in the cluster's block `rank`,
// ordered after this thread's earlier accesses (a consumer giving a stage back to a block whose
// copies also write it).
__device__ __forceinline__ void barrier_arrive_remote(std::uint64_t* barrier, unsigned rank) {
    unsigned remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(shared_address(barrier)), "r"(rank));
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
}

// Every thread of every block of the cluster meets here; what each wrote before is seen by all after.
__device__ __forceinline__ void cluster_sync() {
#if __CUDA_ARCH__ >= 900
    asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
#else
    __trap();
#endif
}

// `bytes` (a multiple of 16) contiguous bytes from 16-byte aligned `from`, counted on `barrier`.
__device__ __forceinline__ void bulk_load(unsigned to, const void* from, unsigned bytes, std::uint64_t* barrier) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(to),
                 "l"(from), "r"(bytes), "r"(shared_address(barrier))
                 : "memory");
}

}  // namespace vlattice::cuda
