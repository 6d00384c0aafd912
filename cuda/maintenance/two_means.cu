#include "maintenance/two_means.cuh"

#include "math/ordered_distance.cuh"
#include "math/ordered_sums.cuh"
#include "math/tma.cuh"
#include "math/warp_math.cuh"
#include "runtime/cuda_check.hpp"
#include "runtime/launch.hpp"

#include "vlattice/two_means.hpp"

#include <cub/block/block_reduce.cuh>

namespace vlattice::cuda {

namespace {

// One anchor's 2-means is the work of a cluster of kRanks blocks on GPUs with clusters (sm_90 on):
// one block took ~0.4 ms at 256 members of d = 784, bound by its own instruction issue, and one
// anchor is often a whole launch. Elsewhere one block does all of it (kRanks = 1).
// The distances split by member, each block measuring a contiguous share; the member-order sums
// split by coordinate, each block adding every member at its share of the coordinates, so that
// each sum keeps the CPU's order. The blocks meet at cluster barriers wherever one reads what
// another wrote, and before one overwrites what another may still be reading (distances, sides,
// counts, centres, all in global memory, where racecheck sees no hazard).
constexpr int kThreads = 1024;
constexpr int kHalfWarps = kThreads / kDistanceLanes;
// A block's sums read the members' values at its coordinates through shared memory, a chunk of
// members at a time copied by the whole block (all of a chunk's loads in flight); shares wider than
// a stage are read where they lie.
constexpr std::size_t kStageBytes = 48 * 1024;
constexpr int kMaxStageRows = 1024;
// The centres the distances read are copied into shared memory when both fit in this much, and in
// what the GPU gives a block beside the stage and the kernel's own arrays.
constexpr std::size_t kCentreBytes = 64 * 1024;

// A block's share [begin, end) of `count` members or coordinates.
struct Span {
    int begin;
    int end;
};

__host__ __device__ inline int share_of(int count, int ranks) { return (count + ranks - 1) / ranks; }

__device__ inline Span span_of(int count, unsigned rank, int ranks) {
    const int begin = ::min(count, static_cast<int>(rank) * share_of(count, ranks));
    return {begin, ::min(count, begin + share_of(count, ranks))};
}

struct Layout {
    int stage_rows;     // members per staged chunk of a block's coordinates; 0: read where they lie
    int centre_stride;  // values from the first centre's copy to the second's; 0: no copies
};

// Dynamic shared memory: the centres' copies, the stage, and the staged members' sides.
std::size_t shared_bytes(const Layout& layout, int d, int ranks) {
    const std::size_t rows = static_cast<std::size_t>(layout.stage_rows);
    return (2 * static_cast<std::size_t>(layout.centre_stride) + rows * share_of(d, ranks)) * sizeof(float) + rows;
}

// `shared_limit`: the dynamic shared memory a block may have beside the kernel's static arrays.
Layout layout_of(int d, int ranks, std::size_t shared_limit) {
    Layout layout{0, 0};
    const std::size_t share_bytes = static_cast<std::size_t>(share_of(d, ranks)) * sizeof(float);
    if (share_bytes <= kStageBytes) {
        layout.stage_rows = static_cast<int>(std::min<std::size_t>(kMaxStageRows, kStageBytes / share_bytes));
    }
    const int stride = (d + 3) / 4 * 4;
    if (2 * static_cast<std::size_t>(stride) * sizeof(float) <= kCentreBytes) {
        layout.centre_stride = stride;
        if (shared_bytes(layout, d, ranks) > shared_limit) {
            layout.centre_stride = 0;
        }
    }
    return layout;
}

struct Piece {
    const float* rows;  // the anchor's members
    int count;
};

// dist[2 i + slot] = ordered_squared_distance(member i, centre) for this block's members i; with
// `right`, the distances to both centres, in slots 0 and 1. A half warp per member and centre.
__device__ void measure(const Piece& p, int d, Span members, const float* centre, const float* right, int slot,
                        float* dist) {
    const int per = right == nullptr ? 1 : 2;
    const auto tasks = static_cast<std::size_t>(members.end - members.begin) * per;
    for_rows_by_half_warps(tasks, threadIdx.x / kDistanceLanes, kHalfWarps, [&](std::size_t task, bool valid, int l) {
        const std::size_t i = members.begin + task / per;
        const bool to_right = per == 2 && task % 2 == 1;
        const float value = ordered_squared_distance(p.rows + i * d, to_right ? right : centre, d, l);
        if (valid && l == 0) {
            dist[2 * i + (per == 2 ? (to_right ? 1 : 0) : slot)] = value;
        }
    });
}

// Sums of every member's values at this block's coordinates, in member order, in double: sums[k]
// takes the left side's (every member's without `sides`), sums[d + k] the right's.
__device__ void sum_share(const Piece& p, int d, Span coordinates, const signed char* sides, double* sums,
                          const Layout& layout, float* stage, signed char* stage_sides) {
    const int width = coordinates.end - coordinates.begin;
    const bool staged = layout.stage_rows > 0;
    for (int k = coordinates.begin + threadIdx.x; k < coordinates.end; k += kThreads) {
        sums[k] = 0.0;
        sums[d + k] = 0.0;
    }
    const int chunk = staged ? layout.stage_rows : p.count;
    for (int first = 0; first < p.count; first += chunk) {
        const int rows = ::min(chunk, p.count - first);
        if (staged) {
#pragma unroll 4
            for (int j = threadIdx.x; j < rows * width; j += kThreads) {
                const int r = j / width;
                stage[j] = p.rows[static_cast<std::size_t>(first + r) * d + coordinates.begin + (j - r * width)];
            }
            if (sides != nullptr) {
                for (int j = threadIdx.x; j < rows; j += kThreads) {
                    stage_sides[j] = sides[first + j];
                }
            }
            __syncthreads();
        }
        for (int k = threadIdx.x; k < width; k += kThreads) {
            double left = sums[coordinates.begin + k];
            double right = sums[d + coordinates.begin + k];
            for (int r = 0; r < rows; ++r) {
                const float value = staged ? stage[r * width + k]
                                           : p.rows[static_cast<std::size_t>(first + r) * d + coordinates.begin + k];
                const signed char s = sides == nullptr ? 0 : (staged ? stage_sides[r] : sides[first + r]);
                if (s == 1) {
                    right += value;
                } else {
                    left += value;
                }
            }
            sums[coordinates.begin + k] = left;
            sums[d + coordinates.begin + k] = right;
        }
        if (staged) {
            __syncthreads();  // the stage is read before the next chunk overwrites it
        }
    }
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

// Every block of the cluster runs the same decisions on the same data (the farthest members, the
// energies, whether to stop), so all leave the kernel at the same point; one writes the results.
template <int kRanks>
__global__ void __launch_bounds__(kThreads) two_means_kernel(TwoMeansArgs a, Layout layout) {
    // Every block of the anchor's meets here; what each wrote before is seen by all after.
    const auto meet = []() {
        if constexpr (kRanks > 1) {
            cluster_sync();
        } else {
            __syncthreads();
        }
    };
    extern __shared__ __align__(16) float dynamic[];
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
    const unsigned rank = kRanks > 1 ? cluster_rank() : 0;
    const std::size_t t = a.first + blockIdx.x / kRanks;  // list position
    const std::size_t start = a.offsets[t] - a.offsets[a.first];
    const Piece p{a.rows + start * a.d, static_cast<int>(a.offsets[t + 1] - a.offsets[t])};
    const int d = a.d;
    const int tid = threadIdx.x;
    const bool writes = rank == 0 && tid == 0;
    float* mean = a.means + t * d;
    float* left = a.centres + t * 2 * d;
    float* right = left + d;
    double* side_sums = a.side_sums + t * 2 * d;
    int* counts = a.counts + t * 2 * kRanks;
    float* dist = a.distances + start * 2;
    signed char* side = a.sides + start;
    const Span members = span_of(p.count, rank, kRanks);
    const Span coordinates = span_of(d, rank, kRanks);
    float* const stage = dynamic + 2 * layout.centre_stride;
    auto* const stage_sides =
        reinterpret_cast<signed char*>(stage + static_cast<std::size_t>(layout.stage_rows) * share_of(d, kRanks));
    // The centres as the distances read them: copies in shared memory, or where they lie.
    const float* near[2] = {left, right};
    auto copy_centre = [&](int c, const float* from) {
        if (layout.centre_stride > 0) {
            float* to = dynamic + c * layout.centre_stride;
            for (int k = tid; k < d; k += kThreads) {
                to[k] = from[k];
            }
            near[c] = to;
        } else {
            near[c] = from;
        }
    };
    if (writes) {
        a.ok[t] = 0;
    }
    if (p.count < 2) {
        return;
    }
    sum_share(p, d, coordinates, nullptr, side_sums, layout, stage, stage_sides);
    for (int k = coordinates.begin + tid; k < coordinates.end; k += kThreads) {
        mean[k] = static_cast<float>(side_sums[k] / static_cast<double>(p.count));
    }
    meet();
    copy_centre(0, mean);
    __syncthreads();
    // The distances to the mean stay in the right slots until the Lloyd steps: `before` needs them.
    measure(p, d, members, near[0], nullptr, 1, dist);
    meet();
    const int from_mean = farthest(dist + 1, p.count, 2, reduce.far);
    if (tid == 0) {
        chosen[0] = from_mean;
        differ = 0;
    }
    __syncthreads();
    const float* first_row = p.rows + static_cast<std::size_t>(chosen[0]) * d;
    for (int k = coordinates.begin + tid; k < coordinates.end; k += kThreads) {
        left[k] = first_row[k];
    }
    copy_centre(0, first_row);
    __syncthreads();
    measure(p, d, members, near[0], nullptr, 0, dist);
    meet();
    const int from_left = farthest(dist, p.count, 2, reduce.far);
    if (tid == 0) {
        chosen[1] = from_left;
    }
    __syncthreads();
    const float* second_row = p.rows + static_cast<std::size_t>(chosen[1]) * d;
    for (int k = coordinates.begin + tid; k < coordinates.end; k += kThreads) {
        right[k] = second_row[k];
    }
    for (int k = tid; k < d; k += kThreads) {
        if (second_row[k] != first_row[k]) {
            differ = 1;
        }
    }
    copy_centre(1, second_row);
    __syncthreads();
    if (differ == 0) {
        return;  // every member is the same point
    }
    const double before = sums.total(MeanDistance{dist}, static_cast<std::size_t>(p.count), 0.0);
    if (writes) {
        a.sums[2 * t] = before;
    }
    // Step 0 overwrites both slots of this block's members, which every block has just read (the
    // farthest from the first centre, the energy before). Without this barrier a block that ran
    // ahead changed another's `before`: seen under racecheck, which slows blocks unevenly.
    meet();
    for (int i = members.begin + tid; i < members.end; i += kThreads) {
        side[i] = -1;
    }
    double after = 0.0;
    for (int step = 0; step <= kTwoMeansSteps; ++step) {
        // Each of the block's members to its nearer centre; the counts are integers, exact in any order.
        measure(p, d, members, near[0], near[1], 0, dist);
        __syncthreads();
        int changed = 0;
        int on_right = 0;
        for (int i = members.begin + tid; i < members.end; i += kThreads) {
            const signed char s = dist[2 * i + 1] < dist[2 * i] ? 1 : 0;
            changed += s != side[i] ? 1 : 0;
            on_right += s;
            side[i] = s;
        }
        changed = CountReduce(reduce.count).Sum(changed);
        __syncthreads();
        on_right = CountReduce(reduce.count).Sum(on_right);
        if (tid == 0) {
            counts[2 * rank] = changed;
            counts[2 * rank + 1] = on_right;
        }
        meet();
        if (tid == 0) {
            int all_changed = 0;
            int all_right = 0;
            for (int r = 0; r < kRanks; ++r) {
                all_changed += counts[2 * r];
                all_right += counts[2 * r + 1];
            }
            moved = all_changed;
            size[0] = static_cast<unsigned>(p.count - all_right);
            size[1] = static_cast<unsigned>(all_right);
        }
        __syncthreads();
        if (step == kTwoMeansSteps || moved == 0) {
            after = sums.total(SideDistance{dist, side}, static_cast<std::size_t>(p.count), 0.0);
            break;
        }
        sum_share(p, d, coordinates, side, side_sums, layout, stage, stage_sides);
        for (int k = coordinates.begin + tid; k < coordinates.end; k += kThreads) {
            if (size[0] > 0) {
                left[k] = static_cast<float>(side_sums[k] / static_cast<double>(size[0]));
            }
            if (size[1] > 0) {
                right[k] = static_cast<float>(side_sums[d + k] / static_cast<double>(size[1]));
            }
        }
        // The counts of this step are read everywhere, and the new centres written, before the next
        // step's counts or distances.
        meet();
        copy_centre(0, left);
        copy_centre(1, right);
        __syncthreads();
    }
    if (writes) {
        a.sums[2 * t + 1] = after;
        a.ok[t] = 1;
    }
}

}  // namespace

void launch_two_means(const TwoMeansArgs& a, cudaStream_t stream) {
    if (a.count == 0) {
        return;
    }
    const int ranks = a.clusters ? kTwoMeansBlocks : 1;
    const auto launch = [&](auto kernel, unsigned cluster) {
        const std::size_t own = static_shared_bytes(kernel);
        const Layout layout = layout_of(a.d, ranks, a.shared_limit > own ? a.shared_limit - own : 0);
        launch_kernel_ex(kernel, "two_means_kernel", dim3(static_cast<unsigned>(a.count * ranks)), kThreads,
                         shared_bytes(layout, a.d, ranks), cluster, stream, a, layout);
    };
    if (a.clusters) {
        launch(two_means_kernel<kTwoMeansBlocks>, kTwoMeansBlocks);
    } else {
        launch(two_means_kernel<1>, 1);
    }
}

}  // namespace vlattice::cuda
