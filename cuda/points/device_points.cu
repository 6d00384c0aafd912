#include "points/device_points.hpp"

#include "points/point_distance.cuh"
#include "runtime/cuda_check.hpp"
#include "runtime/stream.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace vlattice::cuda {

namespace {

// Points up to this size are uploaded without pinned staging: allocating and pinning the staging
// costs more than a pageable copy of a small set (10k x 128 on the H100 machine: init 17 -> 9 ms).
constexpr std::size_t kPageableUploadBytes = std::size_t{64} << 20;
// Each half of the double-buffered upload: large enough for full PCIe speed, small enough to pin cheaply.
constexpr std::size_t kStagingFloats = std::size_t{4} << 20;

// Rows per chunk of the upload: all of a small set, else whole rows filling one staging half.
std::size_t chunk_rows(std::size_t n, std::size_t d) {
    if (n * d * sizeof(float) <= kPageableUploadBytes) {
        return n;
    }
    return std::min(n, std::max<std::size_t>(1, kStagingFloats / d));
}

}  // namespace

bool DevicePoints::rounded_to(unsigned flags, const PointFormat& format) {
    // The exponent keeps every point below 2^15 after scaling, so an overflow means a wrong format.
    return (flags & kHalfOverflow) == 0 && (format.storage == PointStorage::f32 || (flags & kHalfInexact) == 0);
}

void DevicePoints::throw_not_rounded(const PointFormat& format) {
    throw Error(std::string("cuda backend: the points are not held exactly by the ") + storage_name(format.storage) +
                " format with exponent " + std::to_string(format.exponent) +
                " (they must be rounded with round_to_format first)");
}

void DevicePoints::add_footprint(Footprint& need, std::size_t n, std::size_t d, PointStorage storage) {
    const std::size_t stride = static_cast<std::size_t>(half_stride(static_cast<int>(d)));
    need.add<std::uint16_t>(n * stride).add<float>(n).add<float>(n).add<float>(n);
    if (storage == PointStorage::f32) {
        need.add<float>(n * d).add<std::uint16_t>(n * stride);
    } else {
        need.add<float>(chunk_rows(n, d) * d);  // the upload's device staging
    }
}

template <class Land, class Consume>
void DevicePoints::copy_up(const PointView& points, cudaStream_t stream, Land land, Consume consume) {
    const std::size_t n = points.rows;
    const std::size_t d = points.cols;
    const std::size_t rows_per_chunk = chunk_rows(n, d);
    if (rows_per_chunk == n) {
        std::vector<float> widened;
        float* to = land(0);
        CUDA_CHECK(cudaMemcpyAsync(to, points.block(0, n, widened), n * d * sizeof(float), cudaMemcpyHostToDevice,
                                   stream));
        consume(0, n, to);
        CUDA_CHECK(cudaStreamSynchronize(stream));  // before `widened` goes
        return;
    }
    // Through pinned staging in two halves: the CPU fills one half while the DMA engine drains the other.
    PinnedBuffer<float> staging(2 * rows_per_chunk * d);
    Event drained[2];
    std::size_t part = 0;
    for (std::size_t first = 0; first < n; first += rows_per_chunk, ++part) {
        const std::size_t half = part % 2;
        const std::size_t rows = std::min(rows_per_chunk, n - first);
        float* buffer = staging.data() + half * rows_per_chunk * d;
        if (part >= 2) {
            drained[half].synchronize();
        }
        points.widen_rows(first, rows, buffer);
        float* to = land(first);
        CUDA_CHECK(cudaMemcpyAsync(to, buffer, rows * d * sizeof(float), cudaMemcpyHostToDevice, stream));
        drained[half].record(stream);
        consume(first, rows, to);
    }
    CUDA_CHECK(cudaStreamSynchronize(stream));  // the staging goes when this returns
}

void DevicePoints::upload(const PointView& points, const PointFormat& format, cudaStream_t stream) {
    const std::size_t n = points.rows;
    const std::size_t d = points.cols;
    const int stride = half_stride(static_cast<int>(d));
    n_ = 0;
    d_ = 0;
    format_ = format;
    fit_buffer(norms_, n);
    fit_buffer(flags_, 1);
    fit_buffer(head_, n * stride);
    CUDA_CHECK(cudaMemsetAsync(flags_.data(), 0, flags_.bytes(), stream));
    SplitArgs split;
    split.d = static_cast<int>(d);
    split.exponent = format.exponent;
    split.type = half_type();
    split.flags = flags_.data();
    if (format.storage == PointStorage::f32) {
        fit_buffer(floats_, n * d);
        fit_buffer(tail_, n * stride);
        copy_up(
            points, stream, [&](std::size_t first) { return floats_.data() + first * d; },
            [](std::size_t, std::size_t, const float*) {});
        split.rows = floats_.data();
        split.count = n;
        split.head = head_.data();
        split.tail = tail_.data();
        launch_split_rows(split, stream);
    } else {
        floats_ = {};
        tail_ = {};
        // The 16-bit rows are the only copy: each chunk lands in float32 staging and is rounded from there.
        DeviceBuffer<float> staging(chunk_rows(n, d) * d);
        copy_up(
            points, stream, [&](std::size_t) { return staging.data(); },
            [&](std::size_t first, std::size_t rows, const float* landed) {
                SplitArgs part = split;
                part.rows = landed;
                part.count = rows;
                part.head = head_.data() + first * stride;
                launch_split_rows(part, stream);
            });
    }
    unsigned flags = 0;
    CUDA_CHECK(cudaMemcpyAsync(&flags, flags_.data(), sizeof flags, cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    if (!rounded_to(flags, format)) {
        release();
        throw_not_rounded(format);
    }
    if ((flags & kHalfInexact) == 0) {
        // Every point is exact in the 16-bit format (pixels, say): the products need no point tails,
        // and the 16-bit rows hold the same values as the float32 ones, in half the bytes, for every
        // kernel that reads points.
        tail_ = {};
        floats_ = {};
    }
    n_ = n;
    d_ = d;
    fit_buffer(head_norms_, n);
    fit_buffer(roundings_, n);
    queue_norms(stream);
    CUDA_CHECK(cudaStreamSynchronize(stream));
}

void DevicePoints::queue_norms(cudaStream_t stream) {
    launch_squared_norms(rows(), n_, static_cast<int>(d_), norms_.data(), nullptr, stream);
    HeadNormArgs heads;
    heads.rows = rows();
    heads.head = head_.data();
    heads.count = n_;
    heads.d = static_cast<int>(d_);
    heads.exponent = format_.exponent;
    heads.type = half_type();
    heads.head_norms = head_norms_.data();
    heads.roundings = roundings_.data();
    launch_head_norms(heads, stream);
}

void DevicePoints::add_tile_footprint(Footprint& need, std::size_t capacity, std::size_t d, PointStorage storage,
                                      bool floats) {
    const std::size_t stride = static_cast<std::size_t>(half_stride(static_cast<int>(d)));
    need.add<std::uint16_t>(capacity * stride).add<float>(capacity).add<float>(capacity).add<float>(capacity);
    need.add<float>(capacity * d);  // floats_ or the landing
    if (storage == PointStorage::f32 && floats) {
        need.add<std::uint16_t>(capacity * stride);
    }
}

void DevicePoints::reserve_tile(std::size_t capacity, std::size_t d, const PointFormat& format, bool floats) {
    release();
    format_ = format;
    d_ = d;
    const std::size_t stride = static_cast<std::size_t>(half_stride(static_cast<int>(d)));
    head_ = DeviceBuffer<std::uint16_t>(capacity * stride);
    norms_ = DeviceBuffer<float>(capacity);
    head_norms_ = DeviceBuffer<float>(capacity);
    roundings_ = DeviceBuffer<float>(capacity);
    if (format.storage == PointStorage::f32 && floats) {
        floats_ = DeviceBuffer<float>(capacity * d);
        tail_ = DeviceBuffer<std::uint16_t>(capacity * stride);
    } else {
        landing_ = DeviceBuffer<float>(capacity * d);
    }
}

void DevicePoints::queue_tile(std::size_t count, unsigned* flags, cudaStream_t stream) {
    SplitArgs split;
    split.rows = tile_landing();
    split.count = count;
    split.d = static_cast<int>(d_);
    split.exponent = format_.exponent;
    split.type = half_type();
    split.head = head_.data();
    split.tail = tail_.size() > 0 ? tail_.data() : nullptr;
    split.flags = flags;
    launch_split_rows(split, stream);
    n_ = count;
    queue_norms(stream);
}

void DevicePoints::release() {
    floats_ = {};
    head_ = {};
    tail_ = {};
    norms_ = {};
    head_norms_ = {};
    roundings_ = {};
    flags_ = {};
    landing_ = {};
    n_ = 0;
    d_ = 0;
}

PointRows DevicePoints::rows() const {
    if (floats_.size() > 0) {
        return PointRows::floats(floats_.data(), static_cast<int>(d_));
    }
    const RowType type = half_type() == HalfType::bf16 ? RowType::bf16 : RowType::f16;
    return {head_.data(), type, half_stride(static_cast<int>(d_)), std::ldexp(1.0f, -format_.exponent)};
}

}  // namespace vlattice::cuda
