// The single-product tensor-core assign (one 16-bit product per point-anchor pair), warp-specialised:
// one producer thread (of a warpgroup that gives its registers to the others) streams the anchor tiles (and, for d > 256, the points) through a four-stage
// ring of shared memory with the tensor memory accelerator, and two consumer warpgroups multiply
// without a block-wide barrier in the loop, each waiting only for the stage it reads (full) and
// giving it back once its wgmma are done (empty). A block holds 256 points, 128 per consumer
// warpgroup as two wgmma rows of 64, so each anchor tile read from L2 serves twice the points of the
// split kernel's blocks; for d <= 256 the points are loaded once and stay. Needs sm_90a.
//
// For larger d the point chunks stream once per anchor tile: 48 KB per stage from L2 or DRAM. With
// many anchor tiles (kPairTiles) the blocks go in pairs (a cluster of two) that share the points and
// split the anchor tiles of their split between them: each loads half of every point chunk and
// multicasts it to both, so a stage costs each SM 32 KB. A stage is given back to both producers
// (its bytes come from both), and at the end the second block hands its lists to the first, which
// merges and stores them.
#include "assign/fast_assign.cuh"

#include "assign/fragment_offers.cuh"
#include "assign/single_window.cuh"
#include "math/tma.cuh"
#include "math/wgmma.cuh"
#include "runtime/cuda_check.hpp"
#include "runtime/launch.hpp"

#include <cooperative_groups.h>
#include <math_constants.h>

#include <cmath>

namespace vlattice::cuda {

namespace {

namespace cg = cooperative_groups;

constexpr int kPoints = kSinglePoints;
constexpr int kAnchors = kFastTile;
constexpr int kConsumerThreads = 256;
constexpr int kThreads = kConsumerThreads + 128;  // and the producer's warpgroup
// Registers per thread after the roles are set: the producer needs few, each consumer holds 128
// accumulators and four lists. 128 x 40 + 256 x 232 is the 168 per thread that 384 threads get.
constexpr int kProducerRegisters = 40;
constexpr int kConsumerRegisters = 232;
static_assert(128 * kProducerRegisters + kConsumerThreads * kConsumerRegisters <= kThreads * 168, "register file");
constexpr int kHalves = kPoints / 2 / kGroupRows;   // wgmma rows per consumer warpgroup
constexpr int kStages = 4;
constexpr int kResidentChunks = kKeptRowValues / kBoxValues;
constexpr unsigned kRowBytes = kBoxValues * 2;
constexpr unsigned kPointChunkBytes = kPoints * kRowBytes;
constexpr unsigned kAnchorChunkBytes = kAnchors * kRowBytes;
[[maybe_unused]] constexpr unsigned kNormBytes = kAnchors * sizeof(float);
[[maybe_unused]] constexpr int kColumns = kAccumulators / 2;  // of each tile, per thread: two of every eight
constexpr int kPair = 2;                     // blocks of a cluster, for d > 256
constexpr int kPairRows = kPoints / kPair;   // the point rows each block of a pair loads
// Splits of fewer anchor tiles run unpaired: a pair's stages wait on both blocks, which paid at 1M x
// 768 with 16,384 anchors (128 tiles per split; assign 85.8 -> 76.4 ms) and lost at Fashion-MNIST
// with 1,024 (8 tiles; 0.46 -> 0.52 ms, though its DRAM traffic fell from 66 % to 8 % of the peak).
constexpr int kPairTiles = 32;
static_assert(kHalves == 2 && kPoints == 2 * kHalves * kGroupRows, "two warpgroups of two wgmma rows");

__host__ __device__ inline int chunk_count(int stride) { return static_cast<int>(ceil_div(static_cast<std::size_t>(stride), kBoxValues)); }

// Dynamic shared memory: resident point boxes (one per chunk) and the stages' anchor boxes, or per
// stage a point box and an anchor box; plus slack to start at a swizzle atom.
std::size_t dynamic_bytes(bool resident, int chunks) {
    const std::size_t boxes = resident ? static_cast<std::size_t>(chunks) * kPointChunkBytes + kStages * kAnchorChunkBytes
                                       : std::size_t{kStages} * (kPointChunkBytes + kAnchorChunkBytes);
    return boxes + kSwizzleAtom;
}

// point_map's boxes are kPoints rows, or kPairRows for pairs.
template <HalfType kType, bool kResident, bool kPaired>
__global__ void __launch_bounds__(kThreads, 1)
    single_assign_kernel(const __grid_constant__ CUtensorMap point_map, const __grid_constant__ CUtensorMap anchor_map,
                         HalfAssignArgs a) {
    static_assert(!(kResident && kPaired), "resident points are loaded once; pairs share streamed ones");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ unsigned char dynamic[];
    __shared__ Candidate exchange[kPaired ? kPoints : 1];  // the second block's lists, in the first
    __shared__ __align__(16) float tile_norms[kStages][kAnchors];  // with each tile's first chunk
    // Per row, as ordered_bits, the least bound any list of the row has found (offer_fragment_row).
    __shared__ unsigned row_bound[kPoints];
    __shared__ std::uint64_t full[kStages];
    __shared__ std::uint64_t empty[kStages];
    __shared__ std::uint64_t points_in;

    const unsigned base = (shared_address(dynamic) + kSwizzleAtom - 1) & ~(kSwizzleAtom - 1);
    const int chunks = chunk_count(a.stride);
    auto point_box = [&](int chunk, int slot) {
        return kResident ? base + chunk * kPointChunkBytes : base + slot * (kPointChunkBytes + kAnchorChunkBytes);
    };
    auto anchor_box = [&](int slot) {
        return kResident ? base + chunks * kPointChunkBytes + slot * kAnchorChunkBytes
                         : base + slot * (kPointChunkBytes + kAnchorChunkBytes) + kPointChunkBytes;
    };
    const int tid = threadIdx.x;
    // Block numbers run over a point tile's splits (and a pair's two blocks) first: the blocks that
    // run at once then share their point rows, which stream once per anchor tile, through L2.
    const std::size_t unit = blockIdx.x / (kPaired ? kPair : 1);
    const std::size_t row0 = unit / a.splits * kPoints;
    // A pair's blocks both run `count` tiles, its first block the split's tiles begin, begin + 2,
    // ..., the second begin + 1, ...; a tile at or past the split's end (the second block's last,
    // for an odd number) is multiplied like any other, its columns +inf.
    const unsigned rank = kPaired ? cluster_rank() : 0;
    const auto split = static_cast<unsigned>(unit % a.splits);
    const TileRange tiles = split_tiles(a.m, a.tiles_per_split, split);
    const std::size_t step = kPaired ? kPair : 1;
    const std::size_t count = (tiles.end - tiles.begin + step - 1) / step;
    struct Tile {
        std::size_t col0;  // its first anchor
        bool inside;       // of the split
    };
    auto tile_of = [&](std::size_t t) {
        const std::size_t tile = tiles.begin + rank + t * step;
        return Tile{tile * kAnchors, tile < tiles.end};
    };
    if (tid == 0) {
        for (int s = 0; s < kStages; ++s) {
            barrier_init(&full[s], 1);
            barrier_init(&empty[s], kConsumerThreads + (kPaired ? kConsumerThreads / kWarp : 0));
        }
        barrier_init(&points_in, 1);
        barrier_init_fence();
    }
    for (int r = tid; r < kPoints; r += kThreads) {
        row_bound[r] = ordered_bits(CUDART_INF_F);
    }
    // The last block-wide barrier: from here on the warps meet only at the stages. A pair's blocks
    // meet too, as each copies into and arrives on the other's barriers.
    if constexpr (kPaired) {
        cluster_sync();
    } else {
        __syncthreads();
    }

    if (tid >= kConsumerThreads) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kProducerRegisters));
        if (tid == kConsumerThreads) {
            if constexpr (kResident) {
                barrier_expect(&points_in, chunks * kPointChunkBytes);
                for (int c = 0; c < chunks; ++c) {
                    box_load(point_box(c, 0), &point_map, c * kBoxValues, static_cast<int>(row0), &points_in);
                }
            }
            int slot = 0;
            unsigned phase = 0;
            for (std::size_t t = 0; t < count; ++t) {
                const auto [col0, inside] = tile_of(t);
                for (int c = 0; c < chunks; ++c) {
                    barrier_wait(&empty[slot], phase ^ 1);
                    barrier_expect(&full[slot], kAnchorChunkBytes + (kResident ? 0 : kPointChunkBytes) +
                                                    (c == 0 && inside ? kNormBytes : 0));
                    box_load(anchor_box(slot), &anchor_map, c * kBoxValues, static_cast<int>(col0), &full[slot]);
                    if constexpr (kPaired) {
                        box_load_multicast(point_box(c, slot) + rank * kPairRows * kRowBytes, &point_map,
                                           c * kBoxValues, static_cast<int>(row0 + rank * kPairRows), &full[slot],
                                           (1u << kPair) - 1);
                    } else if constexpr (!kResident) {
                        box_load(point_box(c, slot), &point_map, c * kBoxValues, static_cast<int>(row0), &full[slot]);
                    }
                    if (c == 0 && inside) {
                        // The norms' buffer is padded to whole tiles, with +inf (HalfAssignArgs::anchor_norms).
                        bulk_load(shared_address(tile_norms[slot]), a.anchor_norms + col0, kNormBytes, &full[slot]);
                    }
                    if (++slot == kStages) {
                        slot = 0;
                        phase ^= 1;
                    }
                }
            }
        }
        if constexpr (kPaired) {
            cluster_sync();  // the consumers' (below): no block leaves while the other may still reach it
        }
        return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kConsumerRegisters));

    const int lane = tid % kWarp;
    const int group = tid / 128;  // consumer warpgroup: points [128 group, 128 group + 128)
    const int warp_row = (tid / kWarp) % 4 * 16;
    const int quad = lane % 4;
    // Owned row o of wgmma row h is block row row_of(h, o); see wgmma.cuh for the fragment.
    auto row_of = [&](int h, int o) { return group * 128 + h * kGroupRows + warp_row + o * 8 + lane / 4; };
    Candidate top[kHalves][kOwnedRows];
    RowWindow window[kHalves][kOwnedRows];
    float limit[kHalves][kOwnedRows];  // offer_fragment_row
#pragma unroll
    for (int h = 0; h < kHalves; ++h) {
#pragma unroll
        for (int o = 0; o < kOwnedRows; ++o) {
            top[h][o] = empty_candidate();
            window[h][o] = single_row_window(a.single, row0 + row_of(h, o), a.n, true);
            // Values beyond the window of the last assign's anchor can never matter: most rows
            // then offer nothing from their first tile on, instead of a falling record each time.
            const float prior = prior_best(a.single, a.prior, row0 + row_of(h, o), a.n, a.m);
            limit[h][o] = prior < CUDART_INF_F ? prior + window[h][o](prior) : CUDART_INF_F;
        }
    }
    // A stage goes back once this warp's wgmma that read it are done and every thread has read its
    // norms: each thread arrives for its own reads (one arrival per warp after a __syncwarp also
    // orders them, but compute-sanitizer's racecheck flags the producer's next copy into the norms).
    // The other block of a pair only copies points into the stage, which only wgmma read: one
    // arrival per warp there.
    auto release = [&](int slot) {
        barrier_arrive(&empty[slot]);
        if constexpr (kPaired) {
            if (lane == 0) {
                barrier_arrive_remote(&empty[slot], rank ^ 1);
            }
        }
    };
    if constexpr (kResident) {
        barrier_wait(&points_in, 0);
    }
    const int my_col = quad * 2;
    const unsigned rows_offset = group * 128 * kRowBytes;  // the warpgroup's rows within a point box
    float acc[kHalves][kAccumulators];
    int slot = 0;
    unsigned phase = 0;
    for (std::size_t t = 0; t < count; ++t) {
        const auto [col0, inside] = tile_of(t);
        // The norms of the thread's columns, read before the stage that holds them goes back. They
        // join the dot products only in the epilogue: an accumulator that started at the norm would
        // carry its magnitude through every step's rounding, doubling the window at large d.
        barrier_wait(&full[slot], phase);
        float norms[kColumns];
#pragma unroll
        for (int j = 0; j < kColumns / 2; ++j) {
            const float2 pair = inside ? *reinterpret_cast<const float2*>(&tile_norms[slot][my_col + j * 8])
                                       : make_float2(CUDART_INF_F, CUDART_INF_F);
            norms[2 * j] = pair.x;
            norms[2 * j + 1] = pair.y;
        }
        // Each chunk's wgmma run on while the next chunk is waited for; the previous chunk's stage
        // goes back once they are done.
        int previous = 0;
        for (int c = 0; c < chunks; ++c) {
            if (c > 0) {
                barrier_wait(&full[slot], phase);
            }
            pin(acc[0]);
            pin(acc[1]);
            wgmma_fence();
            const unsigned points = point_box(c, slot) + rows_offset;
            const unsigned anchors = anchor_box(slot);
#pragma unroll
            for (int s = 0; s < kBoxValues / kMmaK; ++s) {
                const unsigned k_bytes = s * kMmaK * 2;
                const std::uint64_t b = swizzled_descriptor(anchors + k_bytes);
#pragma unroll
                for (int h = 0; h < kHalves; ++h) {
                    wgmma<kType>(acc[h], swizzled_descriptor(points + h * kGroupRows * kRowBytes + k_bytes), b,
                                 c > 0 || s > 0);
                }
            }
            wgmma_commit();
            if (c > 0) {
                wgmma_wait<1>();
                release(previous);
            }
            previous = slot;
            if (++slot == kStages) {
                slot = 0;
                phase ^= 1;
            }
        }
        wgmma_wait<0>();
        pin(acc[0]);
        pin(acc[1]);
        release(previous);

        // ||c||^2 - 2 x.c in place. Past the last anchor the norms are +inf and the rows arrive as
        // zeros: those columns are +inf, which no list takes.
#pragma unroll
        for (int h = 0; h < kHalves; ++h) {
#pragma unroll
            for (int e = 0; e < kAccumulators; ++e) {
                acc[h][e] = fmaf(-a.scale, acc[h][e], norms[(e / 4) * 2 + e % 2]);
            }
        }
        const std::size_t first_col = col0 + my_col;
        offer_fragments(acc, first_col, window, limit, row_bound, row_of, top);
    }

    // The four lanes of a group hold the same rows, each a quarter of the anchors.
#pragma unroll
    for (int h = 0; h < kHalves; ++h) {
#pragma unroll
        for (int o = 0; o < kOwnedRows; ++o) {
            merge_lanes(top[h][o], 2);
        }
    }
    if constexpr (kPaired) {
        if (rank == 1 && quad == 0) {
            Candidate* first = cg::this_cluster().map_shared_rank(exchange, 0);
#pragma unroll
            for (int h = 0; h < kHalves; ++h) {
#pragma unroll
                for (int o = 0; o < kOwnedRows; ++o) {
                    first[row_of(h, o)] = top[h][o];
                }
            }
        }
        cluster_sync();
        if (rank == 1) {
            return;
        }
        if (quad == 0) {
#pragma unroll
            for (int h = 0; h < kHalves; ++h) {
#pragma unroll
                for (int o = 0; o < kOwnedRows; ++o) {
                    merge(top[h][o], exchange[row_of(h, o)]);
                }
            }
        }
    }
#pragma unroll
    for (int h = 0; h < kHalves; ++h) {
#pragma unroll
        for (int o = 0; o < kOwnedRows; ++o) {
            store_row(a, split, row0 + row_of(h, o), top[h][o], quad);
        }
    }
#else
    __trap();  // only sm_90a has wgmma, and CMakeLists.txt builds nothing else
#endif
}

template <HalfType kType, bool kResident, bool kPaired>
void launch_kernel(const HalfAssignArgs& a, const CUtensorMap& points, const CUtensorMap& anchors,
                   cudaStream_t stream) {
    launch_kernel_ex(single_assign_kernel<kType, kResident, kPaired>, "single_assign_kernel",
                     dim3(static_cast<unsigned>(ceil_div(a.n, kPoints) * a.splits * (kPaired ? kPair : 1))), kThreads,
                     dynamic_bytes(kResident, chunk_count(a.stride)), kPaired ? kPair : 1, stream, points, anchors, a);
}

template <HalfType kType>
void launch_type(const HalfAssignArgs& a, cudaStream_t stream) {
    const bool resident = chunk_count(a.stride) <= kResidentChunks;
    const bool paired = !resident && a.tiles_per_split >= kPairTiles;
    const CUtensorMap points =
        row_box_map(a.point_head, a.n, a.stride, paired ? kPairRows : kPoints, "points' 16-bit heads");
    const CUtensorMap anchors = row_box_map(a.anchor_head, a.m, a.stride, kAnchors, "anchors' 16-bit heads");
    if (resident) {
        return launch_kernel<kType, true, false>(a, points, anchors, stream);
    }
    return paired ? launch_kernel<kType, false, true>(a, points, anchors, stream)
                  : launch_kernel<kType, false, false>(a, points, anchors, stream);
}

}  // namespace

// Each k-step's wgmma is taken to round the sum of its 16 products and the accumulator it adds to
// by 2 (16 + 1) units of 2^-24 of their magnitudes (as truncation could); the accumulators start at
// zero, so every partial sum is at most the whole sum of |products|. Steps run over whole boxes,
// zeros past d included.
float single_accumulation_factor(int d) {
    const int steps = chunk_count(half_stride(d)) * (kBoxValues / kMmaK);
    return static_cast<float>(std::ldexp(2.0 * (kMmaK + 1) * steps, -24));
}

void launch_fast_assign_single(const HalfAssignArgs& a, cudaStream_t stream) {
    if (a.type == HalfType::f16) {
        return launch_type<HalfType::f16>(a, stream);
    }
    launch_type<HalfType::bf16>(a, stream);
}

}  // namespace vlattice::cuda
