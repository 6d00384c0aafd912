// The points of a run on the device, in their storage format, with what the assign needs of them:
// their squared norms, and their 16-bit tensor-core operands (half_operands.cuh) with what rounding
// to them left out. Under f32 storage the float32 rows stay for the exact work and the operands are
// a second copy (a head and a tail), unless every point is exact in the 16-bit format: then, as
// under f16 or bf16 storage, the 16-bit rows are both, so the points take half the memory of
// float32 and the kernels read half the bytes.
#pragma once

#include "math/half_operands.cuh"
#include "math/point_rows.cuh"
#include "runtime/device_buffer.hpp"

#include "vlattice/point_format.hpp"
#include "vlattice/point_set.hpp"
#include "vlattice/types.hpp"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace vlattice::cuda {

class DevicePoints {
public:
    // The device memory of n x d points in `storage`, at most (the tail may be freed after upload).
    static void add_footprint(Footprint& need, std::size_t n, std::size_t d, PointStorage storage);

    // Replaces the points; `points` must already be rounded to `format` (round_to_format). They are
    // widened to float32 on the host a chunk at a time, into the pinned staging, so a stored type
    // needs no float32 copy of the set. Returns once they are on the device. Throws Error when they
    // are not exact in a 16-bit format.
    void upload(const PointView& points, const PointFormat& format, cudaStream_t stream);
    void release();

    // Whether the rounding flags of points split in `format` say they were rounded to it; and the
    // error that says they were not.
    static bool rounded_to(unsigned flags, const PointFormat& format);
    [[noreturn]] static void throw_not_rounded(const PointFormat& format);

    // A tile of streamed points (PointTiles): buffers for up to `capacity` rows of dimension d in
    // `format`, the float32 rows kept where `floats` (f32 storage whose points are not all exact in
    // the 16-bit format: what upload keeps for the same points).
    static void add_tile_footprint(Footprint& need, std::size_t capacity, std::size_t d, PointStorage storage,
                                   bool floats);
    void reserve_tile(std::size_t capacity, std::size_t d, const PointFormat& format, bool floats);
    // Where a tile's rows land in float32 before queue_tile: capacity x d.
    float* tile_landing() { return floats_.size() > 0 ? floats_.data() : landing_.data(); }
    // The `count` rows at tile_landing() made into this tile's rows, norms and head norms, bit for bit
    // those that upload makes of the same rows; the rounding flags (kHalfOverflow, kHalfInexact) are
    // ORed into *flags.
    void queue_tile(std::size_t count, unsigned* flags, cudaStream_t stream);

    std::size_t n() const { return n_; }
    PointStorage storage() const { return format_.storage; }
    PointRows rows() const;
    const float* norms() const { return norms_.data(); }

    // The tensor cores' view: 2^exponent x in `half_type()`, rows of half_stride(d) values.
    HalfType half_type() const { return format_.storage == PointStorage::bf16 ? HalfType::bf16 : HalfType::f16; }
    int exponent() const { return format_.exponent; }
    const std::uint16_t* head() const { return head_.data(); }
    const std::uint16_t* tail() const { return tail_.size() > 0 ? tail_.data() : nullptr; }
    // Per point, for the single product's window: ||head||^2 and ||x - head|| (launch_head_norms).
    const float* head_norms() const { return head_norms_.data(); }
    const float* roundings() const { return roundings_.data(); }

private:
    // The norms and head norms of the n_ rows held (launch_squared_norms, launch_head_norms).
    void queue_norms(cudaStream_t stream);
    // Copies the rows up in chunks of whole rows: the chunk from row `first` lands at land(first), and
    // consume(first, rows, landed) queues the work on it. Returns once everything has run.
    template <class Land, class Consume>
    void copy_up(const PointView& points, cudaStream_t stream, Land land, Consume consume);

    PointFormat format_;
    std::size_t n_ = 0;
    std::size_t d_ = 0;
    DeviceBuffer<float> floats_;  // f32 storage, unless the 16-bit rows are exact: n x d
    DeviceBuffer<std::uint16_t> head_;
    DeviceBuffer<std::uint16_t> tail_;
    DeviceBuffer<float> norms_;
    DeviceBuffer<float> head_norms_;
    DeviceBuffer<float> roundings_;
    DeviceBuffer<unsigned> flags_;
    DeviceBuffer<float> landing_;  // a tile's float32 rows, unless they stay in floats_
};

}  // namespace vlattice::cuda
