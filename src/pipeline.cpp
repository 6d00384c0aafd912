#include "vlattice/pipeline.hpp"

#include "numeric.hpp"
#include "vlattice/half.hpp"
#include "vlattice/point_format.hpp"
#include "vlattice/rate.hpp"
#include "vlattice/residual.hpp"

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
    // fit() checks too, but only here is the file known to name it.
    check_accepted_range(loaded.points, path);
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
        {"min_gain", c.min_gain},
        {"patience", c.patience},
        {"init_sample", c.init_sample},
        {"storage", storage_name(c.storage)},
        {"assign_precision", precision_name(c.assign_precision)},
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

std::size_t anchors_for(const CodingRequest& request, std::size_t n, std::size_t wanted) {
    return request.target_bytes ? anchors_within(*request.target_bytes, n, wanted) : wanted;
}

std::vector<std::uint8_t> residual_widths(const CodingRequest& request, const Matrix& points, const FitResult& result) {
    const std::size_t d = points.cols;
    if (!request.target_bytes) {
        if (!is_residual_width(request.bits)) {
            throw Error("--bits: expected 0, 2, 4 or 8, got " + std::to_string(request.bits));
        }
        return request.bits == 0 ? std::vector<std::uint8_t>{} : std::vector<std::uint8_t>(d, static_cast<std::uint8_t>(request.bits));
    }
    const std::size_t bytes = residual_bytes_within(*request.target_bytes, points.rows, result.anchors.rows, d);
    if (bytes == 0) {
        return {};
    }
    return allocate_widths(points, result.anchors, result.assignments, 8 * bytes);
}

void add_residual_codes(VlatFile& file, const Matrix& points, const std::vector<std::uint8_t>& widths) {
    if (file.anchor_storage == AnchorStorage::f16) {
        for (float& value : file.anchors.data) {
            value = half_to_float(float_to_half(value));
        }
    }
    file.residuals = encode_residuals(points, file.anchors, file.assignments, widths);
    file.codec = ResidualCodec::scalar;
}

nlohmann::json coding_json(const CodingRequest& request, const std::vector<std::uint8_t>& widths) {
    nlohmann::json out = {{"bits", request.bits}, {"target_bytes", nullptr}, {"widths", describe_widths(widths)}};
    if (request.target_bytes) {
        out["target_bytes"] = *request.target_bytes;
    }
    return out;
}

}  // namespace vlattice
