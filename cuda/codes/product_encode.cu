#include "codes/product_encode.cuh"

#include "math/warp_math.cuh"
#include "runtime/cuda_check.hpp"
#include "runtime/device_buffer.hpp"

#include <algorithm>

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

// Row i's nearest centroid in sub-space blockIdx.y of stage `stage`: sum over its coordinates in
// increasing t of (double(u) - double(centroid))^2 from +0, no fused multiply-add, ties to the lowest
// id. Unless it is the last stage, the chosen centroid is then taken off u in float, as the CPU does:
// each thread owns its row's coordinates of its sub-space. With kWidth > 0 (sub-spaces of at most
// kWidth coordinates) the thread holds them in registers: read from its row for each of 2^b
// centroids, they were one scattered load per warp lane and centroid coordinate.
template <int kWidth>
__global__ void nearest_centroids_kernel(float* __restrict__ u, const float* __restrict__ centroids,
                                         const std::uint32_t* __restrict__ bounds, int rows, int p, int table,
                                         int stage, int codes, bool last, std::uint16_t* __restrict__ ids) {
    const int j = blockIdx.y;
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows) {
        return;
    }
    const int first = static_cast<int>(bounds[j]);
    const int end = static_cast<int>(bounds[j + 1]);
    float* row = u + static_cast<std::size_t>(i) * p;
    const float* stage_centroids = centroids + static_cast<std::size_t>(stage) * table * p;
    double held[kWidth > 0 ? kWidth : 1];
    if constexpr (kWidth > 0) {
#pragma unroll
        for (int w = 0; w < kWidth; ++w) {
            held[w] = first + w < end ? static_cast<double>(row[first + w]) : 0.0;
        }
    }
    double best = 0.0;
    int best_c = 0;
    for (int c = 0; c < table; ++c) {
        const float* centroid = stage_centroids + static_cast<std::size_t>(c) * p + first;
        double sum = 0.0;
        if constexpr (kWidth > 0) {
#pragma unroll
            for (int w = 0; w < kWidth; ++w) {
                if (first + w < end) {
                    const double diff = __dsub_rn(held[w], static_cast<double>(__ldg(centroid + w)));
                    sum = __dadd_rn(sum, __dmul_rn(diff, diff));
                }
            }
        } else {
            for (int w = 0; w < end - first; ++w) {
                const double diff =
                    __dsub_rn(static_cast<double>(row[first + w]), static_cast<double>(__ldg(centroid + w)));
                sum = __dadd_rn(sum, __dmul_rn(diff, diff));
            }
        }
        if (c == 0 || sum < best) {
            best = sum;
            best_c = c;
        }
    }
    ids[static_cast<std::size_t>(i) * codes + static_cast<std::size_t>(stage) * gridDim.y + j] =
        static_cast<std::uint16_t>(best_c);
    if (!last) {
        const float* chosen = stage_centroids + static_cast<std::size_t>(best_c) * p;
        for (int t = first; t < end; ++t) {
            row[t] = __fsub_rn(row[t], chosen[t]);
        }
    }
}

// The widest sub-space of the codebook, for the kernel that holds it in registers.
std::uint32_t widest_subspace(const std::vector<std::uint32_t>& bounds) {
    std::uint32_t widest = 0;
    for (std::size_t j = 0; j + 1 < bounds.size(); ++j) {
        widest = std::max(widest, bounds[j + 1] - bounds[j]);
    }
    return widest;
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

template <class T>
DeviceBuffer<T> uploaded(const T* values, std::size_t count, cudaStream_t stream) {
    DeviceBuffer<T> out(count);
    CUDA_CHECK(cudaMemcpyAsync(out.data(), values, count * sizeof(T), cudaMemcpyHostToDevice, stream));
    return out;
}

}  // namespace

std::vector<std::uint8_t> encode_product(const ProductCodebook& book, const Matrix& points, const Matrix& anchors,
                                         const std::vector<std::uint32_t>& assignments, cudaStream_t stream) {
    const std::size_t n = points.rows;
    const std::size_t d = points.cols;
    const std::size_t p = book.coded_dims();
    const std::size_t subspaces = book.subspaces();
    const std::size_t codes = book.codes();
    const std::size_t per_row = (d + p) * sizeof(float) + sizeof(std::uint32_t) + codes * sizeof(std::uint16_t);
    const std::size_t tile = tile_rows(n, per_row);

    const DeviceBuffer<float> device_anchors = uploaded(anchors.data.data(), anchors.data.size(), stream);
    const DeviceBuffer<float> rotation = uploaded(book.rotation.data.data(), book.rotation.data.size(), stream);
    const DeviceBuffer<float> centroids = uploaded(book.centroids.data.data(), book.centroids.data.size(), stream);
    const DeviceBuffer<std::uint32_t> bounds = uploaded(book.bounds.data(), book.bounds.size(), stream);
    DeviceBuffer<float> tile_points(tile * d);
    DeviceBuffer<std::uint32_t> tile_assignments(tile);
    DeviceBuffer<float> rotated(tile * p);
    DeviceBuffer<std::uint16_t> tile_ids(tile * codes);

    std::vector<std::uint16_t> ids(n * codes);
    constexpr int kNearestThreads = 128;
    const std::uint32_t widest = widest_subspace(book.bounds);
    const auto nearest_kernel = widest <= 16   ? nearest_centroids_kernel<16>
                                : widest <= 32 ? nearest_centroids_kernel<32>
                                : widest <= 64 ? nearest_centroids_kernel<64>
                                               : nearest_centroids_kernel<0>;
    for (std::size_t first = 0; first < n; first += tile) {
        const std::size_t rows = std::min(tile, n - first);
        CUDA_CHECK(cudaMemcpyAsync(tile_points.data(), points.row(first), rows * d * sizeof(float),
                                   cudaMemcpyHostToDevice, stream));
        CUDA_CHECK(cudaMemcpyAsync(tile_assignments.data(), assignments.data() + first, rows * sizeof(std::uint32_t),
                                   cudaMemcpyHostToDevice, stream));
        launch_rotate(tile_points.data(), tile_assignments.data(), device_anchors.data(), rotation.data(), rows, d, p,
                      rotated.data(), stream);
        const dim3 nearest(static_cast<unsigned>(ceil_div(rows, kNearestThreads)), static_cast<unsigned>(subspaces));
        for (std::size_t stage = 0; stage < book.stages; ++stage) {
            nearest_kernel<<<nearest, kNearestThreads, 0, stream>>>(
                rotated.data(), centroids.data(), bounds.data(), static_cast<int>(rows), static_cast<int>(p),
                static_cast<int>(book.table()), static_cast<int>(stage), static_cast<int>(codes),
                stage + 1 == book.stages, tile_ids.data());
            check_launch("nearest_centroids_kernel", stream);
        }
        CUDA_CHECK(cudaMemcpyAsync(ids.data() + first * codes, tile_ids.data(), rows * codes * sizeof(std::uint16_t),
                                   cudaMemcpyDeviceToHost, stream));
        CUDA_CHECK(cudaStreamSynchronize(stream));
    }
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
