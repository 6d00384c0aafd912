// The warp-level tensor-core MMA that every GPU since Ampere (sm_80) has: m16n8k16 with 16-bit
// operands read from shared memory by ldmatrix and float32 accumulators in registers. A warp's
// 16 x 8 result puts row lane / 4 in elements 0 and 1 and row lane / 4 + 8 in elements 2 and 3, at
// columns 2 (lane % 4) and 2 (lane % 4) + 1: sixteen of them side by side (128 anchors) give the
// same fragment as a warp's share of wgmma's 64 x 128 (wgmma.cuh), so both engines share the epilogue.
#pragma once

#include "math/half_operands.cuh"

#include <cuda_runtime.h>

namespace vlattice::cuda {

// Four 8 x 8 matrices of 16-bit values from shared memory: lanes 8 i to 8 i + 7 give the addresses of
// matrix i's rows (16 bytes each, 16-byte aligned), and each lane receives its two values of row
// lane / 4 of every matrix, in out[i].
__device__ __forceinline__ void load_matrices(unsigned (&out)[4], unsigned address) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(out[0]), "=r"(out[1]), "=r"(out[2]), "=r"(out[3])
                 : "r"(address));
}

// d += a b for a warp: a the 16 x 16 rows (load_matrices of rows 0-7 and 8-15 at values 0-7, then
// at 8-15), b a 16 x 8 column block given as its 8 rows of 16 values (the matrices at values 0-7
// and 8-15 of the same 8 rows).
template <HalfType kType>
__device__ __forceinline__ void mma_16x8x16(float* d, const unsigned (&a)[4], unsigned b0, unsigned b1) {
    if constexpr (kType == HalfType::f16) {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                     "{%8, %9}, {%0, %1, %2, %3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    } else {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                     "{%8, %9}, {%0, %1, %2, %3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
}

}  // namespace vlattice::cuda
