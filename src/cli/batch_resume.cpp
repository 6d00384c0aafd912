#include "batch_resume.hpp"

#include "vlattice/format.hpp"
#include "vlattice/io.hpp"
#include "vlattice/pipeline.hpp"
#include "vlattice/results_file.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>

namespace vlattice::cli {

namespace {

namespace fs = std::filesystem;

nlohmann::json fingerprint_json(const FileFingerprint& file) {
    char hash[17];
    std::snprintf(hash, sizeof(hash), "%016llx", static_cast<unsigned long long>(file.xxh3));
    return {{"bytes", file.bytes}, {"xxh3", hash}};
}

// A recorded value as the user reads it; JSON-escaped, as the record comes from a file.
std::string shown(const nlohmann::json& value) {
    return value.is_null() ? "unset" : value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The option that sets a recorded key, as typed ("max_iters" is --iters; "train_sample" is batch's
// own option); keys no option sets (the fixed parameters, which a newer vlattice may have changed)
// keep their name.
std::string setting_name(const std::string& key) {
    if (key == "max_iters") {
        return "--iters";
    }
    if (key == "train_sample") {
        return "--train-sample";
    }
    po::options_description options;
    AnnealArgs anneal;
    CodingArgs coding;
    add_anneal_options(options, anneal);
    add_coding_options(options, coding);
    std::string dashed = key;
    std::replace(dashed.begin(), dashed.end(), '_', '-');
    return options.find_nothrow(dashed, false) != nullptr ? "--" + dashed : key;
}

// "--anchors changed 8 -> 16, --bits changed 0 -> 4"; empty when the two agree.
std::string option_changes(const nlohmann::json& recorded, const nlohmann::json& now) {
    std::string changes;
    const auto note = [&](const std::string& key, const nlohmann::json& then, const nlohmann::json& current) {
        if (then != current) {
            changes += (changes.empty() ? "" : ", ") + setting_name(key) + " changed " + shown(then) + " -> " +
                       shown(current);
        }
    };
    for (const auto& item : now.items()) {
        note(item.key(), recorded.value(item.key(), nlohmann::json()), item.value());
    }
    for (const auto& item : recorded.items()) {
        if (!now.contains(item.key())) {
            note(item.key(), item.value(), nlohmann::json());
        }
    }
    return changes;
}

// Why the two outputs are not a whole, readable pair; empty when they are.
std::string unverified(const JobOutputs& out) {
    try {
        const VlatFile file = read_vlat(out.vlat);
        if (!results_h5_complete(out.results, file.n, file.anchors.rows, file.d)) {
            return out.results + " is not a complete results file for " + out.vlat;
        }
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

bool recorded(const nlohmann::json& record) {
    return record.is_object() && record.contains("input") && record["input"].is_object() &&
           record["input"].value("bytes", nlohmann::json()).is_number_unsigned() && record.contains("vlat") &&
           record.contains("options") && record["options"].is_object();
}

}  // namespace

nlohmann::json job_options(const Job& job, Metric metric, const po::variables_map& values, const CodingArgs& coding) {
    nlohmann::json options = config_json(job.anneal.config);
    options["metric"] = metric_name(metric);
    options["dataset"] = is_hdf5_path(job.file) ? nlohmann::json(job.anneal.dataset) : nlohmann::json();
    options["bits"] = job.bits ? *job.bits : static_cast<unsigned>(coding.bits);
    options["target_bytes"] = values.count("target-bytes") ? nlohmann::json(coding.target_bytes) : nlohmann::json();
    options["target_ratio"] = values.count("target-ratio") ? nlohmann::json(coding.target_ratio) : nlohmann::json();
    // Recorded only when given, so that jobs finished before these options existed still match.
    if (values.count("target-file-bytes") > 0) {
        options["target_file_bytes"] = coding.target_file_bytes;
    }
    if (values.count("target-file-ratio") > 0) {
        options["target_file_ratio"] = coding.target_file_ratio;
    }
    if (values.count("train-sample") && values["train-sample"].as<long long>() > 0) {
        options["train_sample"] = values["train-sample"].as<long long>();
    }
    return options;
}

nlohmann::json made_from(const FileFingerprint& input, const nlohmann::json& options, const FileFingerprint& vlat) {
    return {{"input", fingerprint_json(input)}, {"options", options}, {"vlat", fingerprint_json(vlat)}};
}

Reuse check_finished_job(const JobOutputs& out, const FileFingerprint& input, const nlohmann::json& options) {
    std::error_code unknown;
    const bool has_vlat = fs::exists(out.vlat, unknown);
    const bool has_results = fs::exists(out.results, unknown);
    if (!has_vlat && !has_results) {
        return {};
    }
    if (!has_vlat || !has_results) {
        return {false, (has_vlat ? out.results : out.vlat) + " is missing"};
    }
    const std::string broken = unverified(out);
    if (!broken.empty()) {
        return {false, "its outputs do not verify: " + broken};
    }
    nlohmann::json record;
    try {
        record = read_results_config(out.results).value("made_from", nlohmann::json());
    } catch (const std::exception&) {
        // Not JSON, or not an object: as good as no record.
    }
    if (!recorded(record)) {
        return {false, out.results + " does not record the input and options it was made from"};
    }
    if (record["vlat"] != fingerprint_json(file_fingerprint(out.vlat))) {
        return {false, out.vlat + " is not the .vlat that " + out.results + " was written with"};
    }
    if (record["input"] != fingerprint_json(input)) {
        const std::uint64_t then = record["input"]["bytes"].get<std::uint64_t>();
        return {false, "the input changed since its outputs were made (" +
                           (then == input.bytes ? "the same " + std::to_string(then) + " bytes, other contents"
                                                : std::to_string(then) + " bytes then, " +
                                                      std::to_string(input.bytes) + " now") +
                           ")"};
    }
    const std::string changes = option_changes(record["options"], options);
    if (!changes.empty()) {
        return {false, changes};
    }
    return {true, ""};
}

}  // namespace vlattice::cli
