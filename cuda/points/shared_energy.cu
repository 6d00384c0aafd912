#include "points/shared_energy.hpp"

#include "points/point_distance.cuh"
#include "runtime/cuda_check.hpp"

#include <algorithm>
#include <string>

namespace vlattice::cuda {

void SharedEnergy::allocate(const RowShare& share) {
    const std::size_t blocks = share.ranks->rank() == 0 ? distance_block_count(share.total_rows) : 0;
    if (block_sums_.size() == blocks && host_.size() == blocks) {
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
    // Rank 0 alone adds them, on its device, and hands every rank its total: ranks on GPUs of other
    // models could round a device sum of their own differently, and then stop at other iterations.
    const std::size_t mine = distance_block_count(points.n());
    std::vector<double> own(mine);
    CUDA_CHECK(cudaMemcpyAsync(own.data(), points.block_sums(), mine * sizeof(double), cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    Collective& ranks = *share.ranks;
    const bool lead = ranks.rank() == 0;
    ranks.gather_to_first(own.data(), mine * sizeof(double), host_.data(), lead ? host_.size() * sizeof(double) : 0);
    double total = 0.0;
    if (lead) {
        CUDA_CHECK(cudaMemcpyAsync(block_sums_.data(), host_.data(), host_.size() * sizeof(double),
                                   cudaMemcpyHostToDevice, stream));
        launch_sum(block_sums_.data(), block_sums_.size(), total_.data(), temp_.data(), temp_.bytes(), stream);
        CUDA_CHECK(cudaMemcpyAsync(&total, total_.data(), sizeof(double), cudaMemcpyDeviceToHost, stream));
        CUDA_CHECK(cudaStreamSynchronize(stream));
    }
    share_values(ranks, &total, 1);
    return total;
}

}  // namespace vlattice::cuda
