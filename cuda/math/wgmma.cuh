// Hopper's warpgroup MMA as the assign kernels use it: m64n128k16 with 16-bit operands from shared
// memory (through matrix descriptors) and float32 accumulators in registers, 64 per thread. In a
// warpgroup's 64 x 128 result, thread t holds rows 16 (t / 32 % 4) + t / 4 % 8 and that + 8, and
// accumulator (e / 2) * 4 + o * 2 + e % 2 is row o's column (e / 2) * 8 + 2 (t % 4) + e % 2, e < 32.
// Needs sm_90a: built for any other architecture, every helper here traps, and the runtime never
// launches a kernel that reaches one (kernel_family.hpp).
#pragma once

#include "math/half_operands.cuh"

#include <cuda_runtime.h>

#include <cstdint>

namespace vlattice::cuda {

constexpr int kAccumulators = 64;
constexpr int kGroupRows = 64;  // wgmma's m
constexpr int kMmaK = 16;
constexpr int kOwnedRows = 2;     // rows per thread
constexpr int kOwnedValues = 32;  // values per owned row

__device__ __forceinline__ unsigned shared_address(const void* pointer) {
    return static_cast<unsigned>(__cvta_generic_to_shared(pointer));
}

// d (+)= a b^T for a warpgroup: 64 points x 16 values at `a`, 128 anchors x 16 values at `b`; with
// `accumulate` false, d = a b^T.
template <HalfType kType>
__device__ __forceinline__ void wgmma(float (&d)[kAccumulators], std::uint64_t a, std::uint64_t b, bool accumulate) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if constexpr (kType == HalfType::f16) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                     : "l"(a), "l"(b), "r"(static_cast<int>(accumulate)));
    } else {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                     : "l"(a), "l"(b), "r"(static_cast<int>(accumulate)));
    }
#else
    static_cast<void>(d);
    static_cast<void>(a);
    static_cast<void>(b);
    static_cast<void>(accumulate);
    __trap();
#endif
}

// The ordering around a batch of wgmma: the fence before the first (after the accumulators were
// last touched), the commit of the batch, and the wait until at most kPending batches are running.
__device__ __forceinline__ void wgmma_fence() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#else
    __trap();
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#else
    __trap();
#endif
}
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
#else
    __trap();
#endif
}

// Shared memory written through the generic proxy (cp.async, stores), made visible to wgmma, which
// reads through the async proxy.
__device__ __forceinline__ void fence_proxy_async() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#else
    __trap();
#endif
}

// Keeps the compiler from moving reads or writes of the accumulators across the asynchronous
// wgmma's fence, commit and wait.
__device__ __forceinline__ void pin(float (&d)[kAccumulators]) {
#pragma unroll
    for (int e = 0; e < kAccumulators; ++e) {
        asm volatile("" : "+f"(d[e])::"memory");
    }
}

}  // namespace vlattice::cuda
