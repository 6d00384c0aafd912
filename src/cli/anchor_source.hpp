// Where a run's anchors come from: a new fit, or another file's (--anchors-from), for compress and
// train.
#pragma once

#include "vlattice/anneal.hpp"
#include "vlattice/backend.hpp"
#include "vlattice/config.hpp"
#include "vlattice/format.hpp"

#include <optional>
#include <string>

namespace vlattice::cli {

// The file --anchors-from names, read and checked; nothing when the option was not given.
std::optional<VlatFile> anchor_source(const std::string& path);

// source's anchors with the points' nearest anchors (reuse_anchors), or a fit with a progress bar.
FitResult fit_or_reuse(const std::optional<VlatFile>& source, const std::string& source_path, const PointView& points,
                       const AnnealConfig& config, Backend& backend, bool quiet);

}  // namespace vlattice::cli
