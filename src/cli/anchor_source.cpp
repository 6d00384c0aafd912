#include "anchor_source.hpp"

#include "activity.hpp"
#include "progress.hpp"

#include "vlattice/model.hpp"

#include <unistd.h>

namespace vlattice::cli {

std::optional<VlatFile> anchor_source(const std::string& path) {
    if (path.empty()) {
        return std::nullopt;
    }
    return during("reading --anchors-from " + path, [&] { return read_vlat(path); });
}

FitResult fit_or_reuse(const std::optional<VlatFile>& source, const std::string& source_path, const PointView& points,
                       const AnnealConfig& config, Backend& backend, bool quiet) {
    if (source) {
        return during("assigning the vectors to the anchors of " + source_path,
                      [&] { return reuse_anchors(*source, points, backend, source_path); });
    }
    ProgressBar progress(!quiet && ::isatty(STDERR_FILENO), config.max_iters, points.rows);
    FitResult result = during("fitting " + std::to_string(config.anchors) + " anchors", [&] {
        return fit(points, config, backend, [&](const IterationRecord& record) { progress.update(record); });
    });
    progress.finish();
    return result;
}

}  // namespace vlattice::cli
