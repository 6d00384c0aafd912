#include "points/shared_energy.hpp"

#include "points/point_distance.cuh"
#include "runtime/cuda_check.hpp"

#include <algorithm>
#include <string>

namespace vlattice::cuda {

void SharedEnergy::allocate(std::size_t total_rows) {
    const std::size_t blocks = distance_block_count(total_rows);
    if (block_sums_.size() == blocks) {
        return;
    }
    block_sums_ = DeviceBuffer<double>(blocks);
    temp_ = DeviceBuffer<unsigned char>(std::max<std::size_t>(sum_temp_bytes(blocks), 1));
    host_.assign(blocks, 0.0);
}

double SharedEnergy::sum(const PointStage& points, const RowShare& share, cudaStream_t stream) {
    if (share.first_row % kPointsPerDistanceBlock != 0 || share.first_row + points.n() > share.total_rows) {
        throw Error("cuda backend: rows " + std::to_string(share.first_row) + " to " +
                    std::to_string(share.first_row + points.n()) + " are not whole blocks of " +
                    std::to_string(kPointsPerDistanceBlock) + " rows of a set of " + std::to_string(share.total_rows));
    }
    std::fill(host_.begin(), host_.end(), 0.0);
    const std::size_t first = share.first_row / kPointsPerDistanceBlock;
    CUDA_CHECK(cudaMemcpyAsync(host_.data() + first, points.block_sums(),
                               distance_block_count(points.n()) * sizeof(double), cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    share_values(*share.ranks, host_.data(), host_.size());
    CUDA_CHECK(cudaMemcpyAsync(block_sums_.data(), host_.data(), host_.size() * sizeof(double), cudaMemcpyHostToDevice,
                               stream));
    launch_sum(block_sums_.data(), block_sums_.size(), total_.data(), temp_.data(), temp_.bytes(), stream);
    double total = 0.0;
    CUDA_CHECK(cudaMemcpyAsync(&total, total_.data(), sizeof(double), cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    return total;
}

}  // namespace vlattice::cuda
