#include "maintenance/nearest_stage.hpp"

#include "assign/assign_stage.hpp"
#include "runtime/cuda_check.hpp"

namespace vlattice::cuda {

void NearestStage::add_anchor_footprint(Footprint& need, std::size_t m, int d) { buffers(m, d, need); }

void NearestStage::allocate_anchors(std::size_t m, int d) {
    release();
    buffers(m, d, AllocateBuffers{});
}

void NearestStage::release() {
    buffers(0, 0, ReleaseBuffers{});
    rows_ = {};
}

NearestRows NearestStage::of_rows(const Matrix& rows, std::size_t d, cudaStream_t stream) {
    if (rows.rows < 2 || rows.cols != d || rows.data.size() != rows.rows * d) {
        throw Error("cuda backend: nearest_rows needs at least two rows of " + std::to_string(d) + " values, got " +
                    std::to_string(rows.rows) + " x " + std::to_string(rows.cols));
    }
    if (rows.rows >= kMaxRows) {
        throw Error("cuda backend: nearest_rows got " + std::to_string(rows.rows) + " rows, more than 2^31");
    }
    grow_buffer(rows_, rows.data.size());
    CUDA_CHECK(cudaMemcpyAsync(rows_.data(), rows.data.data(), rows.data.size() * sizeof(float), cudaMemcpyHostToDevice,
                               stream));
    return nearest(rows_.data(), rows.rows, static_cast<int>(rows.cols), nullptr, nullptr, stream);
}

NearestRows NearestStage::of_anchors(AnchorStage& anchors, AnchorOperands& operands, const PointStage& points,
                                     cudaStream_t stream) {
    return nearest(anchors.data(), anchors.m(), points.d(), &operands, &points.points(), stream);
}

NearestRows NearestStage::nearest(const float* rows, std::size_t count, int d, AnchorOperands* operands,
                                  const DevicePoints* points, cudaStream_t stream) {
    buffers(count, d, GrowBuffers{});
    CUDA_CHECK(cudaMemsetAsync(uncertain_counts_.data(), 0, uncertain_counts_.bytes(), stream));
    const PointRows rows_view = PointRows::floats(rows, d);

    AssignArgs args;
    args.points = rows_view;
    args.anchors = rows;
    args.n = count;
    args.m = count;
    args.d = d;
    args.exclude_self = true;
    // Anchors crowd each other, and they are float32 rows: the kernel needs a window as narrow as
    // float32's. The anchors' own float16 operands give the tensor cores' three products one
    // (narrower at large d); the float32 kernel, the fallback, ran on 64 of the H100's 132
    // multiprocessors at 1,024 anchors, 0.14 ms a pass at d = 784.
    if (operands != nullptr && points->half_type() == HalfType::f16 && kernels_ != GpuKernels::cuda_cores) {
        operands->queue(rows, count, d, points->half_type(), points->exponent(), stream);
        args.point_norms = operands->norms();
        args.anchor_norms = operands->norms();
        args.max_anchor_norm_bits = operands->max_norm_bits();
        args.path = FastPath::half_split;
        args.half = operands->half(points->half_type(), points->exponent());
        args.half.point_head = operands->head();
        args.half.point_tail = operands->tail();
    } else {
        CUDA_CHECK(cudaMemsetAsync(max_norm_bits_.data(), 0, max_norm_bits_.bytes(), stream));
        launch_squared_norms(rows_view, count, d, norms_.data(), max_norm_bits_.data(), stream);
        args.point_norms = norms_.data();
        args.anchor_norms = norms_.data();
        args.max_anchor_norm_bits = max_norm_bits_.data();
        args.path = FastPath::fp32;
    }
    args.engine = tensor_engine(kernels_);
    args.plan = plan_assign(count, count, d, gpu_);
    args.candidates = candidates_.data();
    args.chosen = chosen_.data();
    args.uncertain = uncertain_.data();
    args.uncertain_counts = uncertain_counts_.data();
    args.gpu = gpu_;
    launch_shortlist(args, stream);
    launch_repair(args, stream);

    PointDistanceArgs distances;
    distances.points = rows_view;
    distances.anchors = rows;
    distances.n = count;
    distances.d = d;
    distances.source = chosen_.data();
    distances.distance = distance_.data();
    distances.block_sums = block_sums_.data();
    launch_point_distances(distances, stream);

    NearestRows out;
    out.index.resize(count);
    out.distance.resize(count);
    CUDA_CHECK(cudaMemcpyAsync(out.index.data(), chosen_.data(), count * sizeof(std::uint32_t), cudaMemcpyDeviceToHost,
                               stream));
    CUDA_CHECK(cudaMemcpyAsync(out.distance.data(), distance_.data(), count * sizeof(double), cudaMemcpyDeviceToHost,
                               stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    return out;
}

}  // namespace vlattice::cuda
