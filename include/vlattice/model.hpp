// A model is a .vlat without vectors (n = 0): the anchors as stored and the trained residual code.
// `train` writes one, `encode` codes any vectors with it, and `compress` is the two in one run, so a
// model codes the vectors it was trained on exactly as compress does.
#pragma once

#include "vlattice/anneal.hpp"
#include "vlattice/backend.hpp"
#include "vlattice/coding_plan.hpp"
#include "vlattice/format.hpp"
#include "vlattice/point_set.hpp"
#include "vlattice/stage_seconds.hpp"
#include "vlattice/types.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace vlattice {

// The anchors rounded as `storage` stores them (float16 storage rounds them to half precision).
Matrix stored_anchors(const Matrix& anchors, AnchorStorage storage);

// Where a pass over the rows stands: rows done and in all; called after each tile and at the end.
using RowProgress = std::function<void(std::size_t done, std::size_t total)>;

// The float32 bytes of rows a pass over every vector (nearest_anchors, encode_with_model) hands on at
// once, and the rows they hold in d dimensions.
inline constexpr std::size_t kPassTileBytes = std::size_t{1} << 30;
std::size_t pass_tile_rows(std::size_t d);

// Each point's nearest anchor, exact (ties to the lowest id), by the backend's assign, a tile of at
// most `tile_rows` rows at a time (0: pass_tile_rows), so that the backend holds
// one tile of the points, not all of them: a run that trained on a sample (--train-sample) then
// never has every row on the GPU. Each row gets the anchor it would get in one pass. The backend's
// points are then the last tile's, gone once this returns (the CPU backend keeps a reference to
// what it was given): upload points again before another assign.
std::vector<std::uint32_t> nearest_anchors(const PointView& points, const Matrix& anchors, Backend& backend,
                                           const RowProgress& progress = {}, std::size_t tile_rows = 0);

// A model file's contents: n = 0, the anchors already as stored, the coding's parameters.
VlatFile make_model(const Matrix& stored, AnchorStorage storage, Metric metric, const TrainedCoding& coding,
                    const std::string& metadata_json);

// Codes `points` with `model` (a file read or made by make_model; its n is ignored): each point's
// nearest anchor (`nearest` when the caller has them, as nearest_anchors gives them), then its
// residual code, a tile of `tile_rows` rows at a time (0: pass_tile_rows), each as in one pass, widened
// to float32 a tile at a time where the points are of another type. With `nearest` and no residual
// code no row is read. The result holds n = points.rows vectors. `seconds`, when given, receives the time of each stage (anchors,
// then the code's); `progress` the rows coded after each tile.
VlatFile encode_with_model(const VlatFile& model, const PointView& points, Backend& backend,
                           const std::string& metadata_json, StageSeconds* seconds = nullptr,
                           const std::vector<std::uint32_t>* nearest = nullptr, const RowProgress& progress = {},
                           std::size_t tile_rows = 0);

// Rows handed out a tile at a time: `rows` of `cols` values in all; fetch(first, count, tile) puts
// rows [first, first + count) into `tile`, reusing its storage.
struct RowSource {
    std::size_t rows = 0;
    std::size_t cols = 0;
    std::function<void(std::size_t first, std::size_t count, Matrix& tile)> fetch;
};

// encode_with_model of rows that a source hands out (a file read a tile at a time): the same file as
// encode_with_model of all of them at once, the anchors always searched for.
VlatFile encode_with_model(const VlatFile& model, const RowSource& source, Backend& backend,
                           const std::string& metadata_json, StageSeconds* seconds = nullptr,
                           const RowProgress& progress = {}, std::size_t tile_rows = 0);

// `tail` appended to `base`: both must hold the same model (metric, anchors, codec and its
// parameters, bit for bit); throws Error naming what differs.
VlatFile append_vectors(const VlatFile& base, const VlatFile& tail);

// A fit that keeps `source`'s anchors (as stored) instead of learning new ones: the points' nearest
// anchors and their energy, no iterations. What a second budget on the same data starts from.
FitResult reuse_anchors(const VlatFile& source, const PointView& points, Backend& backend,
                        const std::string& source_name);

// The model of a file (its vectors dropped).
VlatFile model_of(const VlatFile& file);

}  // namespace vlattice
