#include "vlattice/report.hpp"

#include <omp.h>

namespace vlattice {

nlohmann::json iteration_json(const IterationRecord& r) {
    return {
        {"iteration", r.iteration}, {"temperature", r.temperature}, {"trim", r.trim},
        {"eta", r.eta},             {"energy", r.energy},           {"changed", r.changed},
        {"merged", r.merged},       {"split", r.split},             {"reseeded", r.reseeded},
        {"seconds", r.seconds},
    };
}

// The report is the stored metadata plus what the metadata must leave out to stay reproducible.
nlohmann::json run_report(const AnnealConfig& config, const FitResult& result, const ReportContext& context) {
    nlohmann::json report = run_metadata(config, result, context.input);
    report["input"] = context.input.path;
    report["config"]["threads"] = config.threads;
    report["backend"] = context.backend;
    if (!result.points_placement.empty()) {
        report["points_placement"] = result.points_placement;
    }
    report["threads"] = context.threads > 0 ? context.threads : omp_get_max_threads();

    nlohmann::json history = nlohmann::json::array();
    for (const IterationRecord& record : result.history) {
        history.push_back(iteration_json(record));
    }
    report["history"] = std::move(history);
    report["validation"] = {
        {"checks", result.validation.checks},
        {"cpu_recomputed_energy", result.validation.recomputed_energy},
        {"relative_difference", result.validation.relative_difference},
    };

    const PhaseSeconds& fit = result.seconds;
    report["seconds"] = {
        {"load", context.load_seconds},
        {"init", fit.init},
        {"init_upload", fit.init_upload},  // part of init
        {"assign", fit.assign},
        {"reduce", fit.reduce},
        {"update", fit.update},
        {"maintenance", fit.maintenance},
        {"maintenance_nearest", fit.maintenance_nearest},  // parts of maintenance
        {"maintenance_members", fit.maintenance_members},
        {"energy", fit.energy},
        {"validation", fit.validation},
        {"code", context.code_seconds},
        {"write", context.write_seconds},
        {"fit", fit.total},  // init and every iteration: the span a k-means library times
        {"other_fits", context.other_fits_seconds},
        {"total", context.load_seconds + fit.total + context.other_fits_seconds + context.code_seconds +
                      context.write_seconds},
    };
    const auto stages = [](const StageSeconds& seconds) {
        nlohmann::json out = nlohmann::json::object();
        for (const auto& [stage, value] : seconds.entries()) {
            out[stage] = value;
        }
        return out;
    };
    nlohmann::json candidates = nlohmann::json::array();
    for (const auto& [anchors, candidate] : context.code_candidates) {
        candidates.push_back(
            {{"anchors", anchors}, {"code", candidate.description}, {"seconds", stages(candidate.seconds)}});
    }
    report["code_seconds"] = {{"training", stages(context.code_training)},
                              {"coding", stages(context.code_coding)},
                              {"candidates", std::move(candidates)}};
    return report;
}

}  // namespace vlattice
