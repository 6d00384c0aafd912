// A model is a .vlat without vectors (n = 0): the anchors as stored and the trained residual code.
// `train` writes one, `encode` codes any vectors with it, and `compress` is the two in one run, so a
// model codes the vectors it was trained on exactly as compress does.
#pragma once

#include "vlattice/anneal.hpp"
#include "vlattice/backend.hpp"
#include "vlattice/coding_plan.hpp"
#include "vlattice/format.hpp"
#include "vlattice/stage_seconds.hpp"
#include "vlattice/types.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace vlattice {

// The anchors rounded as `storage` stores them (float16 storage rounds them to half precision).
Matrix stored_anchors(const Matrix& anchors, AnchorStorage storage);

// Each point's nearest anchor, exact (ties to the lowest id), by the backend's assign.
std::vector<std::uint32_t> nearest_anchors(const Matrix& points, const Matrix& anchors, Backend& backend);

// A model file's contents: n = 0, the anchors already as stored, the coding's parameters.
VlatFile make_model(const Matrix& stored, AnchorStorage storage, Metric metric, const TrainedCoding& coding,
                    const std::string& metadata_json);

// Codes `points` with `model` (a file read or made by make_model; its n is ignored): each point's
// nearest anchor (`nearest` when the caller has them, as nearest_anchors gives them), then its
// residual code. The result holds n = points.rows vectors. `seconds`, when given, receives the time
// of each stage (anchors, then the code's).
VlatFile encode_with_model(const VlatFile& model, const Matrix& points, Backend& backend,
                           const std::string& metadata_json, StageSeconds* seconds = nullptr,
                           const std::vector<std::uint32_t>* nearest = nullptr);

// `tail` appended to `base`: both must hold the same model (metric, anchors, codec and its
// parameters, bit for bit); throws Error naming what differs.
VlatFile append_vectors(const VlatFile& base, const VlatFile& tail);

// A fit that keeps `source`'s anchors (as stored) instead of learning new ones: the points' nearest
// anchors and their energy, no iterations. What a second budget on the same data starts from.
FitResult reuse_anchors(const VlatFile& source, const Matrix& points, Backend& backend, const std::string& source_name);

// The model of a file (its vectors dropped).
VlatFile model_of(const VlatFile& file);

}  // namespace vlattice
