#include "batch_jobs.hpp"

#include "vlattice/batch_manifest.hpp"
#include "vlattice/device.hpp"

#include <filesystem>

namespace vlattice::cli {

namespace {

namespace fs = std::filesystem;

std::vector<Job> read_manifest(const std::string& path, const BatchArgs& args) {
    std::vector<ManifestJob> entries;
    try {
        entries = read_batch_manifest(path);
    } catch (const Error& e) {
        throw UsageError(std::string("--manifest ") + e.what());
    }
    std::vector<Job> jobs;
    for (const ManifestJob& entry : entries) {
        Job job{entry.name.value_or(fs::path(entry.file).stem().string()), entry.file, args.anneal,
                entry.device.value_or(args.device), entry.bits};
        job.anneal.metric = entry.metric.value_or(args.anneal.metric);
        job.anneal.dataset = entry.dataset.value_or(args.anneal.dataset);
        job.anneal.anchors = entry.anchors.value_or(args.anneal.anchors);
        jobs.push_back(std::move(job));
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
        throw UsageError("no jobs: give input files, a --manifest, or both");
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
            throw UsageError(where + ": the manifest's \"bits\" and the budget (--target-bytes, --target-ratio, "
                             "--target-file-bytes or --target-file-ratio) both set the widths");
        }
    }
    return jobs;
}

JobOutputs outputs_of(const std::string& folder, const Job& job) {
    return {(fs::path(folder) / (job.name + ".vlat")).string(), (fs::path(folder) / (job.name + ".results.h5")).string()};
}

}  // namespace vlattice::cli
