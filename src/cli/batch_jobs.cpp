#include "batch_jobs.hpp"

#include "vlattice/device.hpp"
#include "vlattice/residual.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>

namespace vlattice::cli {

namespace {

namespace fs = std::filesystem;

std::string text_field(const nlohmann::json& entry, const char* key, const std::string& fallback,
                       const std::string& where) {
    if (!entry.contains(key)) {
        return fallback;
    }
    if (!entry[key].is_string()) {
        throw UsageError(where + ": \"" + key + "\" must be text");
    }
    return entry[key].get<std::string>();
}

std::vector<Job> read_manifest(const std::string& path, const BatchArgs& args) {
    std::ifstream in(path);
    if (!in) {
        throw UsageError("--manifest " + path + ": cannot open");
    }
    nlohmann::json manifest;
    try {
        manifest = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
        throw UsageError("--manifest " + path + ": not JSON: " + e.what());
    }
    const nlohmann::json& list = manifest.is_object() && manifest.contains("jobs") ? manifest["jobs"] : manifest;
    if (!list.is_array()) {
        throw UsageError("--manifest " + path + ": expected {\"jobs\": [...]} or a list of jobs");
    }
    const fs::path base = fs::path(path).parent_path();
    std::vector<Job> jobs;
    for (std::size_t i = 0; i < list.size(); ++i) {
        const nlohmann::json& entry = list[i];
        const std::string where = "--manifest " + path + ": job " + std::to_string(i + 1);
        if (!entry.is_object() || !entry.contains("file") || !entry["file"].is_string() ||
            entry["file"].get<std::string>().empty()) {
            throw UsageError(where + ": expected an object with a \"file\" that names one");
        }
        for (const auto& [key, value] : entry.items()) {
            static_cast<void>(value);
            if (key != "file" && key != "name" && key != "anchors" && key != "metric" && key != "device" &&
                key != "dataset" && key != "bits") {
                throw UsageError(where + ": unknown key \"" + key + "\"");
            }
        }
        Job job;
        if (entry.contains("bits")) {
            // Read at full width: get<unsigned>() would wrap 2^32 + 2 to an accepted 2.
            const nlohmann::json& bits = entry["bits"];
            if (!bits.is_number_unsigned() || bits.get<std::uint64_t>() > 8 ||
                !is_residual_width(static_cast<unsigned>(bits.get<std::uint64_t>()))) {
                throw UsageError(where + ": \"bits\" must be 0, 2, 4 or 8");
            }
            job.bits = static_cast<unsigned>(bits.get<std::uint64_t>());
        }
        job.file = (base / entry["file"].get<std::string>()).string();
        job.name = text_field(entry, "name", fs::path(job.file).stem().string(), where);
        job.anneal = args.anneal;
        job.anneal.metric = text_field(entry, "metric", args.anneal.metric, where);
        job.device = text_field(entry, "device", args.device, where);
        job.anneal.dataset = text_field(entry, "dataset", args.anneal.dataset, where);
        if (entry.contains("anchors")) {
            if (!entry["anchors"].is_number_integer() || entry["anchors"].get<long long>() < 1) {
                throw UsageError(where + ": \"anchors\" must be a whole number >= 1");
            }
            job.anneal.anchors = entry["anchors"].get<long long>();
        }
        jobs.push_back(job);
    }
    return jobs;
}

}  // namespace

std::vector<Job> collect_jobs(const BatchArgs& args, bool budget) {
    std::vector<Job> jobs;
    for (const std::string& file : args.files) {
        jobs.push_back({fs::path(file).stem().string(), file, args.anneal, args.device, std::nullopt});
    }
    if (!args.manifest.empty()) {
        for (Job& job : read_manifest(args.manifest, args)) {
            jobs.push_back(std::move(job));
        }
    }
    if (jobs.empty()) {
        throw UsageError("no jobs: give HDF5 files, a --manifest, or both");
    }
    for (std::size_t i = 0; i < jobs.size(); ++i) {
        const std::string& name = jobs[i].name;
        if (name.empty() || name == "." || name == ".." || name.find_first_of(std::string("/\0", 2)) != std::string::npos) {
            throw UsageError("job " + std::to_string(i + 1) + " (" + jobs[i].file + ") is named '" + name +
                             "': a name must be a plain file name, as its outputs are NAME.vlat and NAME.results.h5 "
                             "in the output folder");
        }
        for (std::size_t j = 0; j < i; ++j) {
            if (jobs[i].name == jobs[j].name) {
                throw UsageError("two jobs are named '" + jobs[i].name + "' (" + jobs[j].file + ", " + jobs[i].file +
                                 "); give one a \"name\" in a manifest");
            }
        }
        const std::string where = "job " + std::to_string(i + 1) + " (" + jobs[i].file + ")";
        try {
            check_anneal_args(jobs[i].anneal);
            parse_option_value([&] { return parse_device(jobs[i].device); });
        } catch (const UsageError& e) {
            throw UsageError(where + ": " + e.what());
        }
        if (jobs[i].bits && budget) {
            throw UsageError(where + ": the manifest's \"bits\" and the --target-bytes/--target-ratio budget both set "
                             "the widths");
        }
    }
    return jobs;
}

JobOutputs outputs_of(const std::string& folder, const Job& job) {
    return {(fs::path(folder) / (job.name + ".vlat")).string(), (fs::path(folder) / (job.name + ".results.h5")).string()};
}

}  // namespace vlattice::cli
