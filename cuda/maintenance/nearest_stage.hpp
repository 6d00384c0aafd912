// Maintenance's nearest other row, on the device: for each of a set of rows (the anchors, or rows
// from the host), the nearest of the others and the distance to it, by the exact assign with each
// row excluded from its own candidates.
#pragma once

#include "anchors/anchor_stage.hpp"
#include "assign/anchor_operands.hpp"
#include "assign/assign.cuh"
#include "points/point_distance.cuh"
#include "points/point_stage.hpp"
#include "runtime/device_buffer.hpp"

#include "vlattice/backend.hpp"
#include "vlattice/device.hpp"
#include "vlattice/types.hpp"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace vlattice::cuda {

class NearestStage {
public:
    // `kernels` resolved (never automatic).
    NearestStage(GpuKernels kernels, const GpuShape& gpu) : kernels_(kernels), gpu_(gpu) {}

    // The device memory for the nearest of m anchors of dimension d, which comes with the anchors'
    // so that maintenance's first pass allocates none; more rows grow it on demand.
    void add_anchor_footprint(Footprint& need, std::size_t m, int d);
    void allocate_anchors(std::size_t m, int d);
    void release();

    // Of `rows`: at least two rows of d values (else Error).
    NearestRows of_rows(const Matrix& rows, std::size_t d, cudaStream_t stream);
    // Of all the anchors, with the assign's operands of them (made afresh here); `points` give the
    // operands' type and scale.
    NearestRows of_anchors(AnchorStage& anchors, AnchorOperands& operands, const PointStage& points,
                           cudaStream_t stream);

private:
    template <class Each>
    void buffers(std::size_t count, int d, Each&& each) {
        const std::size_t splits = count == 0 ? 0 : static_cast<std::size_t>(plan_assign(count, count, d, gpu_).splits);
        each(norms_, count);
        each(chosen_, count);
        each(uncertain_, count);
        each(distance_, count);
        each(candidates_, splits * count);
        each(block_sums_, distance_block_count(count));
    }
    // `operands`: those of the rows, which are the anchors, in the points' type and scale.
    NearestRows nearest(const float* rows, std::size_t count, int d, AnchorOperands* operands,
                        const DevicePoints* points, cudaStream_t stream);

    GpuKernels kernels_;
    GpuShape gpu_;
    DeviceBuffer<float> rows_;  // of_rows' rows, uploaded
    DeviceBuffer<float> norms_;
    DeviceBuffer<std::uint32_t> chosen_;
    DeviceBuffer<std::uint32_t> uncertain_;
    DeviceBuffer<double> distance_;
    DeviceBuffer<Candidate> candidates_;
    DeviceBuffer<double> block_sums_;
    DeviceBuffer<unsigned> max_norm_bits_{1};
    DeviceBuffer<unsigned> uncertain_counts_{2};
};

}  // namespace vlattice::cuda
