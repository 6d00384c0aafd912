#include "backend/stages.hpp"

#include "runtime/free_memory.hpp"

#include <string>

namespace vlattice::cuda {

namespace {

std::string mib(std::size_t bytes) {
    return std::to_string((bytes + (std::size_t{1} << 20) - 1) >> 20) + " MiB";
}

}  // namespace

Stages::Stages(int gpu, FastKernel kernel, std::size_t gather_floats, GpuKernels kernels, const GpuShape& shape)
    : gpu(gpu),
      assign(kernel, kernels, shape),
      maintenance(gather_floats, kernels == GpuKernels::hopper, shape),
      nearest(kernels, shape) {}

void Stages::allocate_points(std::size_t n, std::size_t d, PointStorage storage) {
    // Old buffers go first, so that their memory counts as free.
    release_points();
    Footprint need;
    points.add_footprint(need, n, d, storage);
    assign.add_point_footprint(need, n);
    reduce.add_point_footprint(need, n);
    check_fits(need, std::to_string(n) + " points of dimension " + std::to_string(d) + " stored as " +
                         storage_name(storage));
    // A failed allocation (another process, or a sibling fit, may take memory since the check)
    // leaves no stage that looks sized for these points.
    try {
        points.allocate(n, d);
        assign.allocate_points(n);
        reduce.allocate_points(n);
    } catch (...) {
        release_points();
        throw;
    }
}

void Stages::release_points() {
    points.release();
    assign.release();
    reduce.release();
}

void Stages::allocate_anchors(std::size_t m) {
    const std::size_t n = points.n();
    const int d = points.d();
    const auto width = static_cast<std::size_t>(d);
    Footprint need;
    anchors.add_footprint(need, m, width);
    assign.add_anchor_footprint(need, n, m, d);
    reduce.add_anchor_footprint(need, n, m, width);
    maintenance.add_anchor_footprint(need, n, m, width);
    nearest.add_anchor_footprint(need, m, d);
    check_fits(need, std::to_string(m) + " anchors of dimension " + std::to_string(d) + " for " + std::to_string(n) +
                         " points");
    try {
        anchors.allocate(m, width);
        assign.allocate_anchors(n, m, d);
        reduce.allocate_anchors(n, m, width);
        maintenance.allocate_anchors(n, m, width);
        nearest.allocate_anchors(m, d);
    } catch (...) {
        release_anchors();
        throw;
    }
}

void Stages::release_anchors() {
    anchors.release();
    assign.release_anchors();
    reduce.release_anchors();
    maintenance.release();
    nearest.release();
}

void Stages::check_fits(const Footprint& need, const std::string& what) const {
    const MemoryInfo memory = device_memory();
    if (need.bytes() > memory.free) {
        throw Error("GPU " + std::to_string(gpu) + " has too little memory for " + what + ": it needs " +
                    mib(need.bytes()) + ", " + mib(memory.free) + " of " + mib(memory.total) + " are free");
    }
}

}  // namespace vlattice::cuda
