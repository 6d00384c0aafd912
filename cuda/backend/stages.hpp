// The stages of the CUDA backend, and the memory they hold together. For new points or a new anchor
// count, each stage states its footprint for that shape, the total is held against the GPU's free
// memory (and the run's limit, --gpu-memory), and only then is anything allocated: a run too large
// for the GPU is refused up front, with what it needs and what is free, instead of failing halfway.
// Points whose rows would leave too little room are streamed in tiles (PointTiles) instead of held;
// what each point carries (its anchor, distance and sort keys: 28 bytes) stays on the device.
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
#include <string>

namespace vlattice::cuda {

struct Stages {
    // `kernels` resolved (never automatic); `memory_limit` bytes at most for the run (0: no limit).
    Stages(int gpu, FastKernel kernel, std::size_t gather_floats, GpuKernels kernels, const GpuShape& shape,
           std::size_t memory_limit);

    // Rows per tile for n x d points of `type` in `storage`, or 0 where they are held: streamed when
    // holding them would leave less than an eighth of the memory for the anchors, or when
    // VLATTICE_GPU_TILE_ROWS names a tile size (tests).
    std::size_t plan_tiles(std::size_t n, std::size_t d, StoredType type, PointStorage storage);
    // Buffers for n x d points of `type` in `storage`, in tiles of `tile_rows` (0: held); the
    // anchors' must have gone first (release_anchors).
    void allocate_points(std::size_t n, std::size_t d, StoredType type, PointStorage storage, std::size_t tile_rows);
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
    // The bytes the run may still take: the GPU's free memory, within the limit less what is held.
    std::size_t available() const;
    void check_fits(const Footprint& need, const std::string& what) const;

    std::size_t memory_limit_;
    std::size_t held_ = 0;  // the footprints allocated: points, and anchors
    std::size_t point_bytes_ = 0;
    std::size_t anchor_bytes_ = 0;
};

}  // namespace vlattice::cuda
