#include "vlattice/pipeline.hpp"

#include "numeric.hpp"

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>

namespace vlattice {

LoadedPoints load_points(const std::string& path, const ReadOptions& options, Metric metric) {
    LoadedPoints loaded;
    loaded.points = read_vectors(path, options);
    check_finite(loaded.points, path);
    if (metric == Metric::angular) {
        loaded.zero_rows = normalize_rows(loaded.points);
    }
    return loaded;
}

std::size_t normalize_rows(Matrix& points) {
    std::size_t zero_rows = 0;
#pragma omp parallel for schedule(static) reduction(+ : zero_rows)
    for (std::size_t i = 0; i < points.rows; ++i) {
        float* row = points.row(i);
        const double norm = std::sqrt(squared_norm(row, points.cols));
        if (norm == 0.0) {
            ++zero_rows;
            continue;
        }
        for (std::size_t k = 0; k < points.cols; ++k) {
            row[k] = static_cast<float>(row[k] / norm);
        }
    }
    return zero_rows;
}

nlohmann::json config_json(const AnnealConfig& c) {
    return {
        {"anchors", c.anchors},
        {"max_iters", c.max_iters},
        {"t0", c.t0},
        {"cooling", c.cooling},
        {"t_floor", c.t_floor},
        {"trim", c.trim},
        {"trim_final", c.trim_final},
        {"maintenance_every", c.maintenance_every},
        {"merge_factor", c.merge_factor},
        {"split_factor", c.split_factor},
        {"tolerance", c.tolerance},
        {"patience", c.patience},
        {"init_sample", c.init_sample},
        {"seed", c.seed},
    };
}

nlohmann::json run_metadata(const AnnealConfig& config, const FitResult& result, const RunInput& input) {
    return {
        {"tool", "vlattice"},
        {"tool_version", VLATTICE_VERSION},
        {"input", std::filesystem::path(input.path).filename().string()},
        {"n", input.n},
        {"d", input.d},
        {"metric", metric_name(input.metric)},
        {"m_requested", config.anchors},
        {"m", result.anchors.rows},
        {"config", config_json(config)},
        {"iterations", result.iterations},
        {"converged", result.converged},
        {"stop_reason", result.stop_reason},
        {"energy", result.energy},
        {"maintenance",
         {{"merged", result.merged},
          {"split", result.split},
          {"reseeded", result.reseeded},
          {"dropped_empty", result.dropped_empty}}},
    };
}

double equal_assignment_share(const std::vector<std::uint32_t>& a, const std::vector<std::uint32_t>& b) {
    if (a.size() != b.size()) {
        throw Error("cannot compare assignments of " + std::to_string(a.size()) + " and " + std::to_string(b.size()) +
                    " points");
    }
    if (a.empty()) {
        return 1.0;
    }
    std::size_t equal = 0;
#pragma omp parallel for schedule(static) reduction(+ : equal)
    for (std::size_t i = 0; i < a.size(); ++i) {
        equal += a[i] == b[i] ? 1 : 0;
    }
    return static_cast<double>(equal) / static_cast<double>(a.size());
}

VlatFile make_vlat(const FitResult& result, const RunInput& input, AnchorStorage storage,
                   const nlohmann::json& metadata) {
    if (input.d > std::numeric_limits<std::uint32_t>::max()) {
        throw Error(input.path + ": dimension " + std::to_string(input.d) + " does not fit the .vlat header (32 bits)");
    }
    VlatFile file;
    file.n = input.n;
    file.d = static_cast<std::uint32_t>(input.d);
    file.metric = input.metric;
    file.anchor_storage = storage;
    file.codec = ResidualCodec::none;
    file.anchors = result.anchors;
    file.assignments = result.assignments;
    file.metadata_json = metadata.dump();
    return file;
}

}  // namespace vlattice
