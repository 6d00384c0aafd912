// k-means++ on the device (seed_anchors.cuh) for a run: the host's draws go down, the sampled rows
// are gathered in float32, and the picks land in the anchors' rows. Its buffers are grown on demand
// and kept while small, since sub-space fits seed many samples of one shape: about s x (d + 4)
// floats for a sample of s rows.
#pragma once

#include "anchors/anchor_stage.hpp"
#include "points/point_stage.hpp"
#include "runtime/device_buffer.hpp"

#include "fit/init.hpp"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace vlattice::cuda {

class SeedStage {
public:
    // Queues the seeding of the anchors' m rows from `draws` (draw_seeding for the points held).
    void queue(const PointStage& points, AnchorStage& anchors, const SeedingDraws& draws, cudaStream_t stream);
    // Waits for it; true when some round found every weight zero (fewer distinct points than
    // anchors), where the device's picks are not the CPU's.
    bool fell_through(cudaStream_t stream);

private:
    // Past this, the buffers go back after each seeding.
    static constexpr std::size_t kKeptBytes = std::size_t{64} << 20;

    void reserve(std::size_t s, std::size_t d, std::size_t m, std::size_t uniform_count);

    DeviceBuffer<std::uint32_t> sample_ids_;
    DeviceBuffer<float> sample_rows_;
    DeviceBuffer<double> uniforms_;
    DeviceBuffer<double> nearest_;
    DeviceBuffer<std::uint32_t> owner_;
    DeviceBuffer<double> gap_;
    DeviceBuffer<double> block_sums_;
    DeviceBuffer<int> block_lows_;
    DeviceBuffer<std::uint32_t> chosen_{1};
    DeviceBuffer<int> degenerate_{1};
    std::vector<std::uint32_t> sample_;
    Matrix host_rows_;  // the sampled rows of streamed points, until their copy up has run
    std::uint32_t first_ = 0;
};

}  // namespace vlattice::cuda
