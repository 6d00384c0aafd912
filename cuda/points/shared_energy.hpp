// The energy of points split between ranks, added as one process holding them all adds it: every
// rank's blocks' sums (kPointsPerDistanceBlock rows each; a rank's rows start on a whole block) are
// placed side by side on every rank, and the same device sum runs over all of them. Owns the
// whole set's block sums on the device: total_rows / 64 doubles, and CUB's scratch for their sum.
#pragma once

#include "points/point_stage.hpp"
#include "runtime/device_buffer.hpp"

#include "vlattice/collective.hpp"

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

namespace vlattice::cuda {

class SharedEnergy {
public:
    void allocate(std::size_t total_rows);
    // The sum of the distances of all ranks' points, on every rank, from each rank's last block sums
    // (PointStage::queue_take or queue_block_sums, run on `stream`).
    double sum(const PointStage& points, const RowShare& share, cudaStream_t stream);

private:
    std::vector<double> host_;
    DeviceBuffer<double> block_sums_;
    DeviceBuffer<unsigned char> temp_;
    DeviceBuffer<double> total_{1};
};

}  // namespace vlattice::cuda
