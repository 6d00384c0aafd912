#include "backend/stages.hpp"

#include "runtime/environment_cap.hpp"
#include "runtime/free_memory.hpp"

#include <algorithm>
#include <cstdlib>
#include <string>

namespace vlattice::cuda {

namespace {

// Tiles are whole blocks of the energy's per-block sums (kPointsPerDistanceBlock), and at most
// 4M rows: enough for the bus's full speed, few enough that pinned staging is quick to take.
constexpr std::size_t kTileAlign = 64;
constexpr std::size_t kMaxTileRows = std::size_t{1} << 22;
constexpr std::size_t kNoTiles = static_cast<std::size_t>(-1);
// Tiles from the stored rows on the device are taken when they can be this large (or the whole
// set): smaller ones would spend more on each tile's launches than the bus costs.
constexpr std::size_t kMinDeviceTileRows = std::size_t{1} << 17;
// A tile's bytes per row are measured on this many rows, where the 2 MiB pages of its dozen buffers
// hardly count; kPageSlack is what those pages may add to a tile of any size.
constexpr std::size_t kProbeRows = std::size_t{1} << 20;
constexpr std::size_t kPageSlack = std::size_t{32} << 20;

std::string mib(std::size_t bytes) {
    return std::to_string((bytes + (std::size_t{1} << 20) - 1) >> 20) + " MiB";
}

// VLATTICE_GPU_TILE_SOURCE: host (or unset) or device.
TileSource forced_tile_source() {
    const char* source = std::getenv("VLATTICE_GPU_TILE_SOURCE");
    if (source == nullptr || *source == '\0' || std::string(source) == "host") {
        return TileSource::host;
    }
    if (std::string(source) == "device") {
        return TileSource::device;
    }
    throw Error(std::string("VLATTICE_GPU_TILE_SOURCE: expected host or device, got '") + source + "'");
}

}  // namespace

Stages::Stages(int gpu, FastKernel kernel, std::size_t gather_floats, GpuKernels kernels, const GpuShape& shape,
               std::size_t memory_limit)
    : gpu(gpu),
      assign(kernel, kernels, shape),
      maintenance(gather_floats, kernels == GpuKernels::hopper, shape),
      nearest(kernels, shape),
      memory_limit_(memory_limit) {}

PointPlan Stages::plan_points(std::size_t n, std::size_t d, StoredType type, PointStorage storage) {
    static_assert(kTileAlign % kPointsPerDistanceBlock == 0);
    const std::size_t forced = environment_cap("VLATTICE_GPU_TILE_ROWS", kNoTiles);
    if (forced != kNoTiles) {
        return {std::max<std::size_t>(kTileAlign, forced / kTileAlign * kTileAlign), forced_tile_source()};
    }
    // The old points' and anchors' buffers go before new points come.
    const std::size_t room = available() + point_bytes_ + anchor_bytes_;
    Footprint held;
    points.add_footprint(held, n, d, type, storage, PointPlan());
    assign.add_point_footprint(held, n);
    reduce.add_point_footprint(held, n);
    if (held.bytes() <= room - room / 8) {
        return {};
    }
    // Kept on the device, the stored rows leave the anchors less than streaming would: they must
    // still find an eighth of the room, as beside held points.
    const std::size_t on_device = tile_rows(room, n, d, type, storage, TileSource::device, room / 8);
    if (on_device >= std::min(n, kMinDeviceTileRows)) {
        return {on_device, TileSource::device};
    }
    // The footprint checks say what is missing when not even the smallest tile fits.
    return {std::max(tile_rows(room, n, d, type, storage, TileSource::host, 0), kTileAlign), TileSource::host};
}

std::size_t Stages::tile_rows(std::size_t room, std::size_t n, std::size_t d, StoredType type, PointStorage storage,
                              TileSource source, std::size_t anchor_floor) {
    // What stays per point (and the stored rows, from the device); then tiles of a third of what is
    // left, less the allocator's rounding of their buffers, which leaves the rest to the anchors.
    Footprint state;
    points.add_footprint(state, n, d, type, storage, PointPlan{kTileAlign, source});
    reduce.add_point_footprint(state, n);
    Footprint tile;
    PointTiles::add_footprint(tile, 0, kProbeRows, d, type, storage, source);
    assign.add_point_footprint(tile, kProbeRows);
    const std::size_t spare = room > state.bytes() ? (room - state.bytes()) / 3 : 0;
    if (spare <= kPageSlack || 2 * spare < anchor_floor) {
        return 0;
    }
    const std::size_t rows = (spare - kPageSlack) / (tile.bytes() / kProbeRows) / kTileAlign * kTileAlign;
    return std::min(rows, kMaxTileRows);
}

void Stages::allocate_points(std::size_t n, std::size_t d, StoredType type, PointStorage storage,
                             const PointPlan& plan) {
    // Old buffers go first, so that their memory counts as free.
    release_points();
    const std::size_t pass = plan.tile_rows > 0 ? std::min(plan.tile_rows, n) : n;
    Footprint need;
    points.add_footprint(need, n, d, type, storage, plan);
    assign.add_point_footprint(need, pass);
    reduce.add_point_footprint(need, n);
    check_fits(need, std::to_string(n) + " points of dimension " + std::to_string(d) + " stored as " +
                         storage_name(storage) + " (" + describe_plan(plan, type, gpu) + ")");
    // A failed allocation (another process, or a sibling fit, may take memory since the check)
    // leaves no stage that looks sized for these points.
    try {
        points.allocate(n, d, plan);
        assign.allocate_points(pass);
        reduce.allocate_points(n);
    } catch (...) {
        release_points();
        throw;
    }
    point_bytes_ = need.bytes();
    held_ += point_bytes_;
}

void Stages::release_points() {
    points.release();
    assign.release();
    reduce.release();
    held_ -= point_bytes_;
    point_bytes_ = 0;
}

void Stages::allocate_anchors(std::size_t m) {
    const std::size_t n = points.pass_rows();
    const int d = points.d();
    const auto width = static_cast<std::size_t>(d);
    Footprint need;
    anchors.add_footprint(need, m, width);
    assign.add_anchor_footprint(need, n, m, d);
    reduce.add_anchor_footprint(need, points.n(), points.streamed(), m, width);
    maintenance.add_anchor_footprint(need, points.n(), m, width);
    nearest.add_anchor_footprint(need, m, d);
    check_fits(need, std::to_string(m) + " anchors of dimension " + std::to_string(d) + " for " +
                         std::to_string(points.n()) + " points");
    try {
        anchors.allocate(m, width);
        assign.allocate_anchors(n, m, d);
        reduce.allocate_anchors(points.n(), points.streamed(), m, width);
        maintenance.allocate_anchors(points.n(), m, width);
        nearest.allocate_anchors(m, d);
    } catch (...) {
        release_anchors();
        throw;
    }
    anchor_bytes_ = need.bytes();
    held_ += anchor_bytes_;
    assign.limit_scratch(memory_limit_ > 0 ? available() : static_cast<std::size_t>(-1));
}

void Stages::release_anchors() {
    anchors.release();
    assign.release_anchors();
    reduce.release_anchors();
    maintenance.release();
    nearest.release();
    held_ -= anchor_bytes_;
    anchor_bytes_ = 0;
}

std::size_t Stages::available() const {
    const std::size_t free = device_memory().free;
    if (memory_limit_ == 0) {
        return free;
    }
    return std::min(free, memory_limit_ > held_ ? memory_limit_ - held_ : 0);
}

void Stages::check_fits(const Footprint& need, const std::string& what) const {
    const std::size_t room = available();
    if (need.bytes() > room) {
        const MemoryInfo memory = device_memory();
        const std::string limit = memory_limit_ > 0 ? " (the run's limit is " + mib(memory_limit_) + ", " +
                                                          mib(held_) + " of it held)"
                                                    : std::string();
        throw Error("GPU " + std::to_string(gpu) + " has too little memory for " + what + ": it needs " +
                    mib(need.bytes()) + ", " + mib(room) + " are available, " + mib(memory.free) + " of " +
                    mib(memory.total) + " free" + limit);
    }
}

}  // namespace vlattice::cuda
