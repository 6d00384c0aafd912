// The stages of the CUDA backend, and the memory they hold together. For new points or a new anchor
// count, each stage states its footprint for that shape, the total is held against the GPU's free
// memory (and the run's limit, --gpu-memory), and only then is anything allocated: a run too large
// for the GPU is refused up front, with what it needs and what is free, instead of failing halfway.
// Points whose rows would leave too little room are made in tiles each pass (PointTiles) instead of
// held, from their stored rows on the device where those fit, else from the host; what each point
// carries (its anchor, distance and sort keys: 28 bytes) stays on the device.
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

    // Where n x d points of `type` in `storage` go: held, unless that would leave less than an eighth
    // of the memory for the anchors; else tiles from their stored rows kept on the device, where
    // those leave room for tiles of 2^17 rows (or all of them) and an eighth of the memory for the
    // anchors; else tiles from the host. Tests force tiles with VLATTICE_GPU_TILE_ROWS (a size) and
    // VLATTICE_GPU_TILE_SOURCE (device; the host otherwise).
    PointPlan plan_points(std::size_t n, std::size_t d, StoredType type, PointStorage storage);
    // Buffers for n x d points of `type` in `storage`, as `plan` places them; the anchors' must have
    // gone first (release_anchors).
    void allocate_points(std::size_t n, std::size_t d, StoredType type, PointStorage storage, const PointPlan& plan);
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
    // Rows per tile from `source` that `room` bytes leave beside the points' state, 0 where none or
    // where the anchors would be left less than `anchor_floor` bytes.
    std::size_t tile_rows(std::size_t room, std::size_t n, std::size_t d, StoredType type, PointStorage storage,
                          TileSource source, std::size_t anchor_floor);
    // The bytes the run may still take: the GPU's free memory, within the limit less what is held.
    std::size_t available() const;
    void check_fits(const Footprint& need, const std::string& what) const;

    std::size_t memory_limit_;
    std::size_t held_ = 0;  // the footprints allocated: points, and anchors
    std::size_t point_bytes_ = 0;
    std::size_t anchor_bytes_ = 0;
};

}  // namespace vlattice::cuda
