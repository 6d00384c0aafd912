// The energy of points split between ranks, added as one process holding them all adds it: every
// rank's blocks' sums (kPointsPerDistanceBlock rows each; a rank's rows start on a whole block) go
// to rank 0, side by side, and the device sum one process runs adds them there. Owns, on rank 0,
// the whole set's block sums on the device (total_rows / 64 doubles) and CUB's scratch for their sum.
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
    // The buffers rank 0 adds in; none on the other ranks.
    void allocate(const RowShare& share);
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
