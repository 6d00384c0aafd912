// Points streamed through the GPU a tile at a time, for sets larger than the GPU memory a run may
// use (--gpu-memory): the host's rows stay where they are (in memory or in their file), and every
// pass over the points loads them again. A tile's rows cross the bus in their stored type from
// pinned staging, in two halves: while the device works on one tile, a host thread copies the next
// into pinned memory and the copy engine takes it up. On the device each tile becomes the same rows,
// norms and head norms that DevicePoints::upload makes of those points, so every pass gives the bits
// the run holding all points gives.
#pragma once

#include "points/device_points.hpp"
#include "runtime/device_buffer.hpp"
#include "runtime/stream.hpp"

#include "vlattice/point_format.hpp"
#include "vlattice/point_set.hpp"
#include "vlattice/types.hpp"

#include <cuda_runtime.h>

#include <cstddef>
#include <functional>

namespace vlattice::cuda {

class PointTiles {
public:
    // What a tile of `capacity` rows holds on the device, as the largest it may be (float32 rows kept).
    static void add_footprint(Footprint& need, std::size_t capacity, std::size_t d, StoredType type,
                              PointStorage storage);

    // Tiles of `capacity` rows (a multiple of 64, so that per-block sums line up with the whole
    // set's) over `points`, which must outlive them, rounded to `format`. One pass checks that they
    // are exact in the format, as DevicePoints::upload does, and finds whether the float32 rows must
    // be kept. Throws Error like upload.
    void load(const PointView& points, const PointFormat& format, std::size_t capacity, cudaStream_t stream);
    void release();

    std::size_t capacity() const { return capacity_; }
    // The rows of the last tile each() made (for the format's properties between passes).
    const DevicePoints& tile() const { return tile_; }

    // Calls visit(first, rows, tile) for every tile in order, on the device's stream, once its rows
    // are there. The tile is valid until visit returns.
    using Visit = std::function<void(std::size_t first, std::size_t rows, const DevicePoints& tile)>;
    void each(cudaStream_t stream, const Visit& visit);

private:
    std::size_t rows_of(std::size_t t) const;
    // Copies tile t into pinned half t % 2 and queues its copy up on copy_stream_.
    void stage(std::size_t t);
    void pass(cudaStream_t stream, unsigned* flags, const Visit& visit);

    PointView host_;
    PointFormat format_;
    std::size_t capacity_ = 0;
    std::size_t row_bytes_ = 0;  // one row's stored values
    int gpu_ = 0;
    Stream copy_stream_;
    PinnedBuffer<char> pinned_[2];
    DeviceBuffer<char> raw_[2];
    Event landed_[2];    // half t % 2's copy up of tile t is done
    Event consumed_[2];  // the device has widened what landed in half t % 2
    DevicePoints tile_;
    DeviceBuffer<unsigned> flags_{1};
};

}  // namespace vlattice::cuda
