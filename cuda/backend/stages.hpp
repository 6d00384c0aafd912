// The stages of the CUDA backend, and the memory they hold together. For new points or a new anchor
// count, each stage states its footprint for that shape, the total is held against the GPU's free
// memory, and only then is anything allocated: a run too large for the GPU is refused up front, with
// what it needs and what is free, instead of failing halfway.
#pragma once

#include "anchors/anchor_stage.hpp"
#include "assign/assign_stage.hpp"
#include "maintenance/maintenance_stage.hpp"
#include "maintenance/nearest_stage.hpp"
#include "points/point_stage.hpp"
#include "reduce/reduce_stage.hpp"
#include "seeding/seed_stage.hpp"

#include "vlattice/cuda_backend.hpp"
#include "vlattice/device.hpp"
#include "vlattice/point_format.hpp"

#include <cstddef>

namespace vlattice::cuda {

struct Stages {
    // `kernels` resolved (never automatic).
    Stages(int gpu, FastKernel kernel, std::size_t gather_floats, GpuKernels kernels, const GpuShape& shape);

    // Buffers for n x d points in `storage`; the anchors' must have gone first (release_anchors).
    void allocate_points(std::size_t n, std::size_t d, PointStorage storage);
    // Buffers for m anchors over the points held. Either call leaves nothing allocated when it throws.
    void allocate_anchors(std::size_t m);
    void release_anchors();

    int gpu;
    PointStage points;
    AnchorStage anchors;
    SeedStage seeding;
    AssignStage assign;
    ReduceStage reduce;
    MaintenanceStage maintenance;
    NearestStage nearest;

private:
    void release_points();
    void check_fits(const Footprint& need, const std::string& what) const;
};

}  // namespace vlattice::cuda
