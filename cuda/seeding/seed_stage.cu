#include "seeding/seed_stage.hpp"

#include "anchors/anchor_rows.cuh"
#include "runtime/cuda_check.hpp"
#include "seeding/seed_anchors.cuh"

#include <algorithm>
#include <vector>

namespace vlattice::cuda {

void SeedStage::queue(const PointStage& points, AnchorStage& anchors, const SeedingDraws& draws, cudaStream_t stream) {
    const std::size_t s = draws.sample.size();
    const std::size_t d = static_cast<std::size_t>(points.d());
    reserve(s, d, anchors.m(), draws.uniforms.size());
    // The copies' host sources stay until fell_through has waited for the stream.
    sample_.assign(draws.sample.begin(), draws.sample.end());
    first_ = static_cast<std::uint32_t>(draws.first);
    CUDA_CHECK(cudaMemcpyAsync(sample_ids_.data(), sample_.data(), s * sizeof(std::uint32_t), cudaMemcpyHostToDevice,
                               stream));
    CUDA_CHECK(cudaMemcpyAsync(uniforms_.data(), draws.uniforms.data(), draws.uniforms.size() * sizeof(double),
                               cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaMemcpyAsync(chosen_.data(), &first_, sizeof first_, cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaMemsetAsync(degenerate_.data(), 0, degenerate_.bytes(), stream));
    // The sampled rows in float32, in sample order, whatever the storage: the same values from the
    // host's rows where the points are streamed.
    if (points.streamed()) {
        host_rows_ = points.host_points().select(sample_);
        CUDA_CHECK(cudaMemcpyAsync(sample_rows_.data(), host_rows_.data.data(), host_rows_.data.size() * sizeof(float),
                                   cudaMemcpyHostToDevice, stream));
    } else {
        launch_gather_rows(points.points().rows(), sample_ids_.data(), s, points.d(), sample_rows_.data(), stream);
    }

    SeedArgs args;
    args.sample = sample_rows_.data();
    args.d = points.d();
    args.s = s;
    args.m = anchors.m();
    args.uniforms = uniforms_.data();
    args.anchors = anchors.data();
    args.nearest = nearest_.data();
    args.owner = owner_.data();
    args.gap = gap_.data();
    args.block_sums = block_sums_.data();
    args.block_lows = block_lows_.data();
    args.chosen = chosen_.data();
    args.degenerate = degenerate_.data();
    launch_seed_anchors(args, stream);
}

bool SeedStage::fell_through(cudaStream_t stream) {
    int degenerate = 0;
    CUDA_CHECK(cudaMemcpyAsync(&degenerate, degenerate_.data(), sizeof degenerate, cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    host_rows_ = Matrix();
    if (sample_rows_.bytes() + nearest_.bytes() + gap_.bytes() > kKeptBytes) {
        *this = SeedStage();
    }
    return degenerate != 0;
}

void SeedStage::reserve(std::size_t s, std::size_t d, std::size_t m, std::size_t uniform_count) {
    grow_buffer(sample_ids_, s);
    grow_buffer(sample_rows_, s * d);
    grow_buffer(uniforms_, std::max<std::size_t>(uniform_count, 1));
    grow_buffer(nearest_, s);
    grow_buffer(owner_, s);
    grow_buffer(gap_, m);
    grow_buffer(block_sums_, seed_block_count(s));
    grow_buffer(block_lows_, seed_block_count(s));
}

}  // namespace vlattice::cuda
