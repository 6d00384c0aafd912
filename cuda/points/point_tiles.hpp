// Points made a tile at a time, for sets whose 16-bit or float32 rows do not fit in the GPU memory a
// run may use (--gpu-memory). Each pass widens every tile again from the rows in their stored type,
// which are either kept on the device (TileSource::device: a uint8 set takes half the memory of its
// 16-bit rows, and no pass crosses the bus) or stay where they are on the host, in memory or in
// their file (TileSource::host). From the host a tile's rows cross the bus in their stored type from
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

// Where each pass takes a tile's stored rows from.
enum class TileSource { host, device };

class PointTiles {
public:
    // What tiles of `capacity` rows over n rows of dimension d hold on the device, as the largest
    // they may be (float32 rows kept): the tile, and the stored rows or the copies' landing halves.
    static void add_footprint(Footprint& need, std::size_t n, std::size_t capacity, std::size_t d, StoredType type,
                              PointStorage storage, TileSource source);

    // Tiles of `capacity` rows (a multiple of 64, so that per-block sums line up with the whole
    // set's) over `points`, rounded to `format`, from `source`; from the host, `points` must outlive
    // them (PointStage keeps them either way, for k-means++ and maintenance). One pass checks that
    // they are exact in the format, as DevicePoints::upload does, finds whether the float32 rows
    // must be kept, and from the device leaves the stored rows there. Throws Error like upload.
    void load(const PointView& points, const PointFormat& format, std::size_t capacity, TileSource source,
              cudaStream_t stream);
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
    // Where tile t's stored rows are on the device: in the stored set, or in landing half t % 2.
    char* stored_rows(std::size_t t);
    // Copies tile t into pinned half t % 2 and queues its copy up to stored_rows(t) on copy_stream_.
    void stage(std::size_t t);
    // One pass; `staged`: the tiles are copied up first.
    void pass(cudaStream_t stream, unsigned* flags, bool staged, const Visit& visit);

    PointView host_;
    PointFormat format_;
    TileSource source_ = TileSource::host;
    StoredType type_ = StoredType::f32;
    std::size_t rows_ = 0;
    std::size_t cols_ = 0;
    std::size_t capacity_ = 0;
    std::size_t row_bytes_ = 0;  // one row's stored values
    int gpu_ = 0;
    Stream copy_stream_;
    PinnedBuffer<char> pinned_[2];  // while copies go up
    DeviceBuffer<char> raw_[2];     // from the host: the landing halves
    DeviceBuffer<char> stored_;     // from the device: the set's stored rows
    Event landed_[2];    // half t % 2's copy up of tile t is done
    Event consumed_[2];  // the device has widened what landed in half t % 2
    DevicePoints tile_;
    DeviceBuffer<unsigned> flags_{1};
};

}  // namespace vlattice::cuda
