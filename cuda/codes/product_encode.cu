#include "codes/product_encode.cuh"

#include "assign/fast_assign.cuh"
#include "math/warp_math.cuh"
#include "runtime/cuda_check.hpp"
#include "runtime/device_buffer.hpp"
#include "runtime/stream.hpp"

#include <math_constants.h>

#include <algorithm>
#include <vector>

namespace vlattice::cuda {

namespace {

// The rotation's tiles: kTile rows x kTile rotated coordinates per block of kSide x kSide threads,
// each thread kPer x kPer of them, over kDepth coordinates of the residual per step.
constexpr int kTile = 64;
constexpr int kSide = 16;
constexpr int kPer = kTile / kSide;
constexpr int kDepth = 16;

// Tiles of points in flight: about this many bytes of points, rotated residuals and ids per tile.
constexpr std::size_t kTileBytes = std::size_t{256} << 20;

// z[i][t] = sum over k of R[t][k] * r[i][k] in float, from +0 in increasing k, each product and sum
// rounded on its own: rotate_residuals' arithmetic. r[i] = x[i] - a[assignments[i]], or x[i] itself
// without assignments (rotate_rows).
__global__ void rotate_residuals_kernel(const float* __restrict__ points, const std::uint32_t* __restrict__ assignments,
                                        const float* __restrict__ anchors, const float* __restrict__ rotation,
                                        int rows, int d, int p, float* __restrict__ z) {
    __shared__ float residual[kTile][kDepth + 1];
    __shared__ float turn[kDepth][kTile + 1];
    const int tx = threadIdx.x % kSide;
    const int ty = threadIdx.x / kSide;
    const int row0 = blockIdx.y * kTile;
    const int t0 = blockIdx.x * kTile;
    float acc[kPer][kPer];
#pragma unroll
    for (int a = 0; a < kPer; ++a) {
#pragma unroll
        for (int b = 0; b < kPer; ++b) {
            acc[a][b] = 0.0f;
        }
    }
    for (int k0 = 0; k0 < d; k0 += kDepth) {
        for (int e = threadIdx.x; e < kTile * kDepth; e += kSide * kSide) {
            const int r = e / kDepth;
            const int k = k0 + e % kDepth;
            float value = 0.0f;
            if (row0 + r < rows && k < d) {
                const std::size_t i = static_cast<std::size_t>(row0 + r);
                value = points[i * d + k];
                if (assignments != nullptr) {
                    value = __fsub_rn(value, anchors[static_cast<std::size_t>(assignments[i]) * d + k]);
                }
            }
            residual[r][e % kDepth] = value;
        }
        for (int e = threadIdx.x; e < kTile * kDepth; e += kSide * kSide) {
            const int t = e / kDepth;
            const int k = k0 + e % kDepth;
            turn[e % kDepth][t] = t0 + t < p && k < d ? rotation[static_cast<std::size_t>(t0 + t) * d + k] : 0.0f;
        }
        __syncthreads();
        const int depth = min(kDepth, d - k0);
        for (int kk = 0; kk < depth; ++kk) {
#pragma unroll
            for (int a = 0; a < kPer; ++a) {
                const float r = residual[ty + a * kSide][kk];
#pragma unroll
                for (int b = 0; b < kPer; ++b) {
                    acc[a][b] = __fadd_rn(acc[a][b], __fmul_rn(turn[kk][tx + b * kSide], r));
                }
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int a = 0; a < kPer; ++a) {
        const int i = row0 + ty + a * kSide;
#pragma unroll
        for (int b = 0; b < kPer; ++b) {
            const int t = t0 + tx + b * kSide;
            if (i < rows && t < p) {
                z[static_cast<std::size_t>(i) * p + t] = acc[a][b];
            }
        }
    }
}

// The distance in double that decides a code: sum over the sub-space's coordinates in increasing t of
// (double(u) - double(centroid))^2 from +0, each product and sum rounded on its own (the CPU's order).
__device__ double exact_distance(const float* u, const float* centroid, int width) {
    double sum = 0.0;
    for (int w = 0; w < width; ++w) {
        const double diff = __dsub_rn(static_cast<double>(u[w]), static_cast<double>(__ldg(centroid + w)));
        sum = __dadd_rn(sum, __dmul_rn(diff, diff));
    }
    return sum;
}

// exact_distance for the screen's few candidates, out of line so that its loop does not crowd the
// screen's registers.
__device__ __noinline__ double rescore(const float* u, const float* centroid, int width) {
    return exact_distance(u, centroid, width);
}

// Records row i's code `chosen` in code j of the stage and, unless it is the last stage, takes the
// centroid off the row in float, as the CPU does.
__device__ void take_code(float* row, const float* centroid, int first, int end, int chosen, std::size_t slot,
                          bool last, std::uint16_t* ids) {
    ids[slot] = static_cast<std::uint16_t>(chosen);
    if (!last) {
        for (int t = first; t < end; ++t) {
            row[t] = __fsub_rn(row[t], centroid[t]);
        }
    }
}

// What the fast screen reads of a codebook: per code (stage x sub-space) its centroids' coordinates
// padded with zeros to the kernel's width, their squared norms rounded to float, and the largest norm.
struct FastCodes {
    const float* coords;    // codes x table x the kernel's width
    const float* norms;     // codes x table
    const float* max_norm;  // codes
};

constexpr int kNearestThreads = 128;

// Rows per thread of the fast screen: two share every centroid read from shared memory, where their
// coordinates leave room in registers.
__host__ __device__ constexpr int screen_rows(int width) { return width <= 32 ? 2 : 1; }
// Centroids per tile of shared memory: 32 KiB of coordinates.
__host__ __device__ constexpr int screen_tile(int width) { return 8192 / width; }

// The nearest centroid of rows in sub-space blockIdx.y of stage `stage`, for sub-spaces of at most
// kWidth coordinates (a multiple of 4): the first centroid at the least exact_distance, found as the
// CPU finds it (encode_product.cpp): fast float distances ||u||^2 + ||c||^2 - 2 u.c, the dot product
// fused in increasing t, pick the least, and only the centroids within fp32_rounding_factor of it
// (for both distances) are summed in double, in increasing id. Fast distances are off by at most the
// factor times ||u||^2 + ||c||^2, so the exact nearest is always among them: the codes are those of
// the double scan over every centroid, at a small share of its conversions and double operations.
// The centroids come through shared memory in tiles, read by every row of the block at once.
template <int kWidth>
__global__ void __launch_bounds__(kNearestThreads)
    screened_nearest_kernel(float* __restrict__ u, const float* __restrict__ centroids, FastCodes fast,
                            const std::uint32_t* __restrict__ bounds, int rows, int p, int table, int stage,
                            int codes, bool last, std::uint16_t* __restrict__ ids) {
    constexpr int kRows = screen_rows(kWidth);
    constexpr int kTileCentroids = screen_tile(kWidth);
    constexpr int kVectors = kWidth / 4;
    static_assert(kWidth % 4 == 0, "whole float4 per centroid");
    __shared__ float4 tile_coords[kTileCentroids * kVectors];
    __shared__ float tile_norms[kTileCentroids];

    const int j = blockIdx.y;
    const int code = stage * static_cast<int>(gridDim.y) + j;
    const int first = static_cast<int>(bounds[j]);
    const int end = static_cast<int>(bounds[j + 1]);
    const int width = end - first;
    const float factor = fp32_rounding_factor(width);
    const float* stage_centroids = centroids + static_cast<std::size_t>(stage) * table * p;
    const float4* code_coords =
        reinterpret_cast<const float4*>(fast.coords) + static_cast<std::size_t>(code) * table * kVectors;
    const float* code_norms = fast.norms + static_cast<std::size_t>(code) * table;
    const float max_norm = fast.max_norm[code];

    // The thread's rows (a row past the end repeats the last; it is neither stored nor changed).
    int row_index[kRows];
    float held[kRows][kWidth];
    float norm[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
        const int i = (blockIdx.x * kRows + r) * kNearestThreads + static_cast<int>(threadIdx.x);
        row_index[r] = i < rows ? i : rows - 1;
        const float* row = u + static_cast<std::size_t>(row_index[r]) * p + first;
        double squares = 0.0;
#pragma unroll
        for (int w = 0; w < kWidth; ++w) {
            held[r][w] = w < width ? row[w] : 0.0f;
            squares += static_cast<double>(held[r][w]) * held[r][w];
        }
        norm[r] = static_cast<float>(squares);
    }

    // visit(c, fast distances of the thread's rows) for every centroid, a tile of shared memory at a
    // time; a table that fits in one tile is loaded once for both passes.
    const int tiles = (table + kTileCentroids - 1) / kTileCentroids;
    auto load_tile = [&](int t) {
        const int c0 = t * kTileCentroids;
        const int count = min(kTileCentroids, table - c0);
        __syncthreads();
        for (int e = threadIdx.x; e < count * kVectors; e += kNearestThreads) {
            tile_coords[e] = code_coords[static_cast<std::size_t>(c0) * kVectors + e];
        }
        for (int e = threadIdx.x; e < count; e += kNearestThreads) {
            tile_norms[e] = code_norms[c0 + e];
        }
        __syncthreads();
    };
    auto scan = [&](bool loaded, auto visit) {
        for (int t = 0; t < tiles; ++t) {
            if (!loaded) {
                load_tile(t);
            }
            const int c0 = t * kTileCentroids;
            const int count = min(kTileCentroids, table - c0);
            for (int c = 0; c < count; ++c) {
                float dot[kRows];
#pragma unroll
                for (int r = 0; r < kRows; ++r) {
                    dot[r] = 0.0f;
                }
#pragma unroll
                for (int v = 0; v < kVectors; ++v) {
                    const float4 q = tile_coords[c * kVectors + v];
#pragma unroll
                    for (int r = 0; r < kRows; ++r) {
                        dot[r] = fmaf(held[r][4 * v], q.x, dot[r]);
                        dot[r] = fmaf(held[r][4 * v + 1], q.y, dot[r]);
                        dot[r] = fmaf(held[r][4 * v + 2], q.z, dot[r]);
                        dot[r] = fmaf(held[r][4 * v + 3], q.w, dot[r]);
                    }
                }
                float distance[kRows];
#pragma unroll
                for (int r = 0; r < kRows; ++r) {
                    distance[r] = fmaf(-2.0f, dot[r], __fadd_rn(norm[r], tile_norms[c]));
                }
                visit(c0 + c, distance);
            }
        }
    };

    // Pass one: the first least fast distance (NaN left out).
    float least[kRows];
    int least_id[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
        least[r] = CUDART_INF_F;
        least_id[r] = 0;
    }
    scan(false, [&](int c, const auto& distance) {
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
            if (distance[r] < least[r]) {
                least[r] = distance[r];
                least_id[r] = c;
            }
        }
    });
    // Pass two: the candidates, scored in double in increasing id.
    float threshold[kRows];
    double best[kRows];
    int best_id[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
        threshold[r] = least[r] + factor * (2.0f * norm[r] + __ldg(code_norms + least_id[r]) + max_norm);
        best[r] = CUDART_INF;
        best_id[r] = least_id[r];
    }
    scan(tiles == 1, [&](int c, const auto& distance) {
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
            if (distance[r] <= threshold[r]) {
                const double exact = rescore(u + static_cast<std::size_t>(row_index[r]) * p + first,
                                             stage_centroids + static_cast<std::size_t>(c) * p + first, width);
                if (exact < best[r]) {
                    best[r] = exact;
                    best_id[r] = c;
                }
            }
        }
    });
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
        const int i = (blockIdx.x * kRows + r) * kNearestThreads + static_cast<int>(threadIdx.x);
        if (i < rows) {
            take_code(u + static_cast<std::size_t>(i) * p, stage_centroids + static_cast<std::size_t>(best_id[r]) * p,
                      first, end, best_id[r], static_cast<std::size_t>(i) * codes + code, last, ids);
        }
    }
}

// The same codes for sub-spaces wider than the screen holds in registers (a residual code's one
// sub-space over every coordinate): one thread per row scores every centroid in double.
__global__ void exact_nearest_kernel(float* __restrict__ u, const float* __restrict__ centroids,
                                     const std::uint32_t* __restrict__ bounds, int rows, int p, int table, int stage,
                                     int codes, bool last, std::uint16_t* __restrict__ ids) {
    const int j = blockIdx.y;
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows) {
        return;
    }
    const int first = static_cast<int>(bounds[j]);
    const int end = static_cast<int>(bounds[j + 1]);
    float* row = u + static_cast<std::size_t>(i) * p;
    const float* stage_centroids = centroids + static_cast<std::size_t>(stage) * table * p;
    double best = 0.0;
    int best_c = 0;
    for (int c = 0; c < table; ++c) {
        const double sum = exact_distance(row + first, stage_centroids + static_cast<std::size_t>(c) * p + first,
                                          end - first);
        if (c == 0 || sum < best) {
            best = sum;
            best_c = c;
        }
    }
    take_code(row, stage_centroids + static_cast<std::size_t>(best_c) * p, first, end, best_c,
              static_cast<std::size_t>(i) * codes + static_cast<std::size_t>(stage) * gridDim.y + j, last, ids);
}

// The widest sub-space of the codebook, for the kernel that holds it in registers.
std::uint32_t widest_subspace(const std::vector<std::uint32_t>& bounds) {
    std::uint32_t widest = 0;
    for (std::size_t j = 0; j + 1 < bounds.size(); ++j) {
        widest = std::max(widest, bounds[j + 1] - bounds[j]);
    }
    return widest;
}

// The screen's register width for sub-spaces of up to `widest` coordinates, or 0 beyond its widest.
int screen_width(int widest) {
    for (const int width : {4, 8, 16, 32, 64}) {
        if (widest <= width) {
            return width;
        }
    }
    return 0;
}

template <class T>
DeviceBuffer<T> uploaded(const T* values, std::size_t count, cudaStream_t stream) {
    DeviceBuffer<T> out(count);
    CUDA_CHECK(cudaMemcpyAsync(out.data(), values, count * sizeof(T), cudaMemcpyHostToDevice, stream));
    return out;
}

// FastCodes' arrays, owned.
struct ScreenTables {
    DeviceBuffer<float> coords;
    DeviceBuffer<float> norms;
    DeviceBuffer<float> max_norm;
    FastCodes view() const { return FastCodes{coords.data(), norms.data(), max_norm.data()}; }
};

ScreenTables screen_tables(const ProductCodebook& book, int padded, cudaStream_t stream) {
    const std::size_t table = book.table();
    const std::size_t codes = book.codes();
    std::vector<float> coords(codes * table * static_cast<std::size_t>(padded), 0.0f);
    std::vector<float> norms(codes * table);
    std::vector<float> max_norm(codes, 0.0f);
    for (std::size_t j = 0; j < codes; ++j) {
        const std::size_t sub = j % book.subspaces();
        const std::size_t first = book.bounds[sub];
        const std::size_t width = book.bounds[sub + 1] - first;
        for (std::size_t c = 0; c < table; ++c) {
            const float* centroid = book.centroid(j, static_cast<unsigned>(c)) + first;
            double squares = 0.0;
            for (std::size_t w = 0; w < width; ++w) {
                coords[(j * table + c) * padded + w] = centroid[w];
                squares += static_cast<double>(centroid[w]) * centroid[w];
            }
            norms[j * table + c] = static_cast<float>(squares);
            max_norm[j] = std::max(max_norm[j], norms[j * table + c]);
        }
    }
    ScreenTables tables;
    tables.coords = uploaded(coords.data(), coords.size(), stream);
    tables.norms = uploaded(norms.data(), norms.size(), stream);
    tables.max_norm = uploaded(max_norm.data(), max_norm.size(), stream);
    // The host vectors go when this returns: the copies must have left them.
    CUDA_CHECK(cudaStreamSynchronize(stream));
    return tables;
}

struct NearestArgs {
    float* u;
    const float* centroids;
    FastCodes fast;
    const std::uint32_t* bounds;
    int rows;
    int p;
    int table;
    int stage;
    int codes;
    bool last;
    std::uint16_t* ids;
};

template <int kWidth>
void launch_screened(const NearestArgs& a, unsigned subspaces, cudaStream_t stream) {
    const std::size_t per_block = static_cast<std::size_t>(kNearestThreads) * screen_rows(kWidth);
    const dim3 grid(static_cast<unsigned>(ceil_div(static_cast<std::size_t>(a.rows), per_block)), subspaces);
    screened_nearest_kernel<kWidth><<<grid, kNearestThreads, 0, stream>>>(
        a.u, a.centroids, a.fast, a.bounds, a.rows, a.p, a.table, a.stage, a.codes, a.last, a.ids);
    check_launch("screened_nearest_kernel", stream);
}

// One stage's codes of a tile's rows: the screen of the register width `screen`, or with 0 the
// exact scan.
void launch_nearest(const NearestArgs& a, int screen, unsigned subspaces, cudaStream_t stream) {
    switch (screen) {
    case 4:
        return launch_screened<4>(a, subspaces, stream);
    case 8:
        return launch_screened<8>(a, subspaces, stream);
    case 16:
        return launch_screened<16>(a, subspaces, stream);
    case 32:
        return launch_screened<32>(a, subspaces, stream);
    case 64:
        return launch_screened<64>(a, subspaces, stream);
    default:
        break;
    }
    const dim3 grid(static_cast<unsigned>(ceil_div(static_cast<std::size_t>(a.rows), kNearestThreads)), subspaces);
    exact_nearest_kernel<<<grid, kNearestThreads, 0, stream>>>(a.u, a.centroids, a.bounds, a.rows, a.p, a.table,
                                                               a.stage, a.codes, a.last, a.ids);
    check_launch("exact_nearest_kernel", stream);
}

void launch_rotate(const float* points, const std::uint32_t* assignments, const float* anchors, const float* rotation,
                   std::size_t rows, std::size_t d, std::size_t p, float* z, cudaStream_t stream) {
    const dim3 grid(static_cast<unsigned>(ceil_div(p, kTile)), static_cast<unsigned>(ceil_div(rows, kTile)));
    rotate_residuals_kernel<<<grid, kSide * kSide, 0, stream>>>(points, assignments, anchors, rotation,
                                                                static_cast<int>(rows), static_cast<int>(d),
                                                                static_cast<int>(p), z);
    check_launch("rotate_residuals_kernel", stream);
}

// Rows per tile for rows of `per_row` bytes on the device: whole kTile blocks, at most n.
std::size_t tile_rows(std::size_t n, std::size_t per_row) {
    return std::min(n, std::max<std::size_t>(kTile, kTileBytes / per_row / kTile * kTile));
}

}  // namespace

std::vector<std::uint8_t> encode_product(const ProductCodebook& book, const Matrix& points, const Matrix& anchors,
                                         const std::vector<std::uint32_t>& assignments, cudaStream_t stream) {
    const std::size_t n = points.rows;
    const std::size_t d = points.cols;
    const std::size_t p = book.coded_dims();
    const std::size_t codes = book.codes();
    const std::size_t per_row = (d + p) * sizeof(float) + sizeof(std::uint32_t) + codes * sizeof(std::uint16_t);
    // Two tiles in flight, each half the bytes of one alone.
    const std::size_t tile = tile_rows(n, 2 * per_row);

    const DeviceBuffer<float> device_anchors = uploaded(anchors.data.data(), anchors.data.size(), stream);
    const DeviceBuffer<float> rotation = uploaded(book.rotation.data.data(), book.rotation.data.size(), stream);
    const DeviceBuffer<float> centroids = uploaded(book.centroids.data.data(), book.centroids.data.size(), stream);
    const DeviceBuffer<std::uint32_t> bounds = uploaded(book.bounds.data(), book.bounds.size(), stream);
    const int screen = screen_width(static_cast<int>(widest_subspace(book.bounds)));
    const ScreenTables tables = screen > 0 ? screen_tables(book, screen, stream) : ScreenTables{};
    // The second slot's stream reads these uploads too: they must be done before it starts.
    CUDA_CHECK(cudaStreamSynchronize(stream));

    // Tiles alternate between two slots, each on a stream of its own: while one slot's host rows are
    // copied in (pageable, so the host waits for it), the other's kernels run. Its ids come back
    // through pinned memory, which the host reads after waiting for the slot's next turn.
    Stream second;
    struct Slot {
        cudaStream_t stream;
        DeviceBuffer<float> points;
        DeviceBuffer<std::uint32_t> assignments;
        DeviceBuffer<float> rotated;
        DeviceBuffer<std::uint16_t> ids;
        PinnedBuffer<std::uint16_t> host_ids;
        std::size_t first = 0;
        std::size_t rows = 0;
    };
    auto make_slot = [&](cudaStream_t on) {
        return Slot{on,
                    DeviceBuffer<float>(tile * d),
                    DeviceBuffer<std::uint32_t>(tile),
                    DeviceBuffer<float>(tile * p),
                    DeviceBuffer<std::uint16_t>(tile * codes),
                    PinnedBuffer<std::uint16_t>(tile * codes)};
    };
    Slot slots[2] = {make_slot(stream), make_slot(second.get())};
    std::vector<std::uint16_t> ids(n * codes);
    // Waits for the slot's last tile and moves its ids into place.
    auto collect = [&](Slot& slot) {
        CUDA_CHECK(cudaStreamSynchronize(slot.stream));
        std::copy(slot.host_ids.data(), slot.host_ids.data() + slot.rows * codes, ids.begin() + slot.first * codes);
        slot.rows = 0;
    };
    std::size_t turn = 0;
    for (std::size_t first = 0; first < n; first += tile, ++turn) {
        Slot& slot = slots[turn % 2];
        collect(slot);
        slot.first = first;
        slot.rows = std::min(tile, n - first);
        const std::size_t rows = slot.rows;
        CUDA_CHECK(cudaMemcpyAsync(slot.points.data(), points.row(first), rows * d * sizeof(float),
                                   cudaMemcpyHostToDevice, slot.stream));
        CUDA_CHECK(cudaMemcpyAsync(slot.assignments.data(), assignments.data() + first, rows * sizeof(std::uint32_t),
                                   cudaMemcpyHostToDevice, slot.stream));
        launch_rotate(slot.points.data(), slot.assignments.data(), device_anchors.data(), rotation.data(), rows, d, p,
                      slot.rotated.data(), slot.stream);
        for (std::size_t stage = 0; stage < book.stages; ++stage) {
            const NearestArgs args{slot.rotated.data(),
                                   centroids.data(),
                                   tables.view(),
                                   bounds.data(),
                                   static_cast<int>(rows),
                                   static_cast<int>(p),
                                   static_cast<int>(book.table()),
                                   static_cast<int>(stage),
                                   static_cast<int>(codes),
                                   stage + 1 == book.stages,
                                   slot.ids.data()};
            launch_nearest(args, screen, static_cast<unsigned>(book.subspaces()), slot.stream);
        }
        CUDA_CHECK(cudaMemcpyAsync(slot.host_ids.data(), slot.ids.data(), rows * codes * sizeof(std::uint16_t),
                                   cudaMemcpyDeviceToHost, slot.stream));
    }
    collect(slots[0]);
    collect(slots[1]);
    return pack_product_codes(book, ids, n);
}

Matrix rotate_rows(const Matrix& rotation, const Matrix& rows, cudaStream_t stream) {
    const std::size_t n = rows.rows;
    const std::size_t d = rows.cols;
    const std::size_t p = rotation.rows;
    Matrix z(n, p);
    if (n == 0) {
        return z;
    }
    const std::size_t tile = tile_rows(n, (d + p) * sizeof(float));
    const DeviceBuffer<float> device_rotation = uploaded(rotation.data.data(), rotation.data.size(), stream);
    DeviceBuffer<float> tile_rows_in(tile * d);
    DeviceBuffer<float> rotated(tile * p);
    for (std::size_t first = 0; first < n; first += tile) {
        const std::size_t count = std::min(tile, n - first);
        CUDA_CHECK(cudaMemcpyAsync(tile_rows_in.data(), rows.row(first), count * d * sizeof(float),
                                   cudaMemcpyHostToDevice, stream));
        launch_rotate(tile_rows_in.data(), nullptr, nullptr, device_rotation.data(), count, d, p, rotated.data(),
                      stream);
        CUDA_CHECK(cudaMemcpyAsync(z.row(first), rotated.data(), count * p * sizeof(float), cudaMemcpyDeviceToHost,
                                   stream));
        CUDA_CHECK(cudaStreamSynchronize(stream));
    }
    return z;
}

}  // namespace vlattice::cuda
