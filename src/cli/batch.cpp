// vlattice batch [FILE.hdf5 ...] [--manifest M] -o OUTDIR [--force]: one compression per HDF5 file
// (its `train`, or --dataset), written as OUTDIR/<name>.vlat and OUTDIR/<name>.results.h5, scored on
// the file's `test` against its `neighbors` when it has both, and one row per job in
// OUTDIR/summary.csv and summary.json. A job that fails leaves its row with the reason and the
// others run on; finished jobs whose outputs verify are skipped on the next run unless --force.
#include "anneal_options.hpp"
#include "coding_options.hpp"
#include "commands.hpp"
#include "device_note.hpp"
#include "options.hpp"
#include "progress.hpp"

#include "vlattice/anneal.hpp"
#include "vlattice/atomic_file.hpp"
#include "vlattice/codec.hpp"
#include "vlattice/device.hpp"
#include "vlattice/format.hpp"
#include "vlattice/pipeline.hpp"
#include "vlattice/rate.hpp"
#include "vlattice/residual.hpp"
#include "vlattice/results_file.hpp"
#include "vlattice/search.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <unistd.h>

namespace vlattice::cli {

namespace {

namespace fs = std::filesystem;

const CommandHelp kHelp{
    "batch",
    "[FILE.hdf5 ...] [--manifest M] -o OUTDIR [options]",
    "FILE",
    "Compresses the `train` dataset of each HDF5 file (the ann-benchmarks layout)\n"
    "into OUTDIR/<name>.vlat and OUTDIR/<name>.results.h5 (anchors, assignments and\n"
    "the run's config and metrics as attributes). When the file also holds `test`\n"
    "and `neighbors`, 10-recall@10 of exhaustive search over the reconstructed\n"
    "vectors is measured. Every job adds a row to OUTDIR/summary.csv and\n"
    "summary.json; a failed job records its reason and the batch goes on, ending\n"
    "with exit status 1. Jobs whose outputs exist and verify are skipped unless\n"
    "--force, so an interrupted batch resumes where it stopped.\n"
    "A manifest is JSON: {\"jobs\": [{\"file\": \"a.hdf5\", \"name\": \"a\", \"anchors\": 512,\n"
    "\"metric\": \"angular\", \"device\": \"cpu\", \"dataset\": \"train\", \"bits\": 4}, ...]}; paths\n"
    "are "
    "relative to the manifest, and every key but \"file\" overrides the options.",
    true,
};

constexpr std::size_t kRecallAt = 10;

struct BatchArgs {
    AnnealArgs anneal;
    CodingArgs coding;
    std::vector<std::string> files;
    std::string manifest;
    std::string output;
    std::string device;
    bool force = false;
    bool quiet = false;
};

struct Job {
    std::string name;
    std::string file;
    AnnealArgs anneal;  // the command's, with the manifest's anchors, metric and dataset; checked by collect_jobs
    std::string device;
    std::optional<unsigned> bits;  // from a manifest; else the options decide
};

void add_options(po::options_description& options, BatchArgs& a) {
    options.add_options()
        ("output,o", po::value(&a.output)->required()->value_name("OUTDIR"),
         "folder for the outputs and the summary (created when missing)")
        ("manifest", po::value(&a.manifest)->value_name("FILE"), "JSON list of jobs, beside or instead of FILEs")
        ("force", po::bool_switch(&a.force), "redo jobs whose outputs already exist and verify");
    add_anneal_options(options, a.anneal);
    add_coding_options(options, a.coding);
    options.add_options()
        ("device", po::value(&a.device)->default_value("auto")->value_name("KIND"),
         "auto (the GPU when one is usable, else the CPU), cpu, or cuda")
        ("quiet,q", po::bool_switch(&a.quiet), "print nothing but errors");
}

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

// `budget`: --target-bytes or --target-ratio was given. Every job's settings are checked here, once
// (check_anneal_args also fills in each job's config), before the first job runs, so that a mistake
// in the last one does not show only after hours of the others.
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

struct Outputs {
    std::string vlat;
    std::string results;
};

Outputs outputs_of(const std::string& folder, const Job& job) {
    return {(fs::path(folder) / (job.name + ".vlat")).string(), (fs::path(folder) / (job.name + ".results.h5")).string()};
}

// Both outputs exist, the .vlat's checksums hold, and the results file matches its shape.
bool outputs_verify(const Outputs& out) {
    std::error_code missing;
    if (!fs::is_regular_file(out.vlat, missing)) {
        return false;
    }
    try {
        const VlatFile file = read_vlat(out.vlat);
        return results_h5_complete(out.results, file.n, file.anchors.rows, file.d);
    } catch (const Error&) {
        return false;
    }
}

nlohmann::json run_job(const Job& job, std::size_t index, std::size_t count, const BatchArgs& args,
                       const po::variables_map& values, const Outputs& out) {
    using clock = std::chrono::steady_clock;
    AnnealArgs anneal = job.anneal;
    AnnealConfig& config = anneal.config;
    const Metric metric = metric_of(anneal, job.file);
    const DeviceKind device = parse_option_value([&] { return parse_device(job.device); });

    auto start = clock::now();
    const LoadedPoints loaded = load_input(kHelp.name, job.file, anneal, metric, args.quiet);
    const double load_seconds = seconds_since(start);
    CodingRequest coding = coding_request(values, args.coding, loaded.points.cols);
    if (job.bits) {
        coding.bits = *job.bits;
    }
    config.anchors = anchors_for(coding, loaded.points.rows, config.anchors);
    BackendChoice choice = make_backend(device, anneal.gpu, config.threads);
    print_device_note(kHelp.name, choice.note, args.quiet);
    ProgressBar progress(!args.quiet && ::isatty(STDERR_FILENO), config.max_iters, loaded.points.rows);
    const FitResult result =
        fit(loaded.points, config, *choice.backend, [&](const IterationRecord& record) { progress.update(record); });
    progress.finish();

    const RunInput input{job.file, loaded.points.rows, loaded.points.cols, metric};
    start = clock::now();
    const std::vector<std::uint8_t> widths = residual_widths(coding, loaded.points, result);
    nlohmann::json metadata = run_metadata(config, result, input);
    metadata["residuals"] = coding_json(coding, widths);
    VlatFile vlat = make_vlat(result, input, AnchorStorage::f32, metadata);
    if (!widths.empty()) {
        add_residual_codes(vlat, loaded.points, widths);
    }
    write_vlat(out.vlat, vlat);
    const double write_seconds = seconds_since(start);

    start = clock::now();
    nlohmann::json recall = nullptr;
    if (has_hdf5_dataset(job.file, "test") && has_hdf5_dataset(job.file, "neighbors")) {
        const Matrix test = load_points(job.file, ReadOptions{"test"}, metric).points;
        const IdMatrix neighbors = read_ids(job.file, ReadOptions{"neighbors"});
        SearchOptions exhaustive;
        exhaustive.k = kRecallAt;
        recall = recall_at(search(vlat, test, exhaustive), neighbors, kRecallAt);
    }
    const double mse = widths.empty() ? result.energy : reconstruction_mse(vlat, loaded.points);
    const double evaluate_seconds = seconds_since(start);

    const double code_bytes = code_bytes_per_vector(vlat);
    const nlohmann::json row = {
        {"dataset", job.name},
        {"file", job.file},
        {"n", loaded.points.rows},
        {"d", loaded.points.cols},
        {"m", result.anchors.rows},
        {"bytes_per_vector", code_bytes},
        {"ratio", code_bytes / (4.0 * static_cast<double>(loaded.points.cols))},
        {"energy", result.energy},
        {"mse", mse},
        {"residuals", widths.empty() ? std::string("none") : describe_widths(widths)},
        {"recall_at_10", recall},
        {"seconds", {{"load", load_seconds}, {"init", result.seconds.init}, {"fit", result.seconds.total},
                     {"evaluate", evaluate_seconds}, {"write", write_seconds}}},
        {"device", choice.backend->name()},
        {"status", "ok"},
        {"error", ""},
    };
    nlohmann::json settings = config_json(config);
    settings["metric"] = metric_name(metric);
    settings["dataset"] = anneal.dataset;
    write_results_h5(out.results, result.anchors, result.assignments, settings, row);
    if (!args.quiet) {
        std::fprintf(stderr, "vlattice batch: job %zu of %zu: %s: energy %.6g, recall@10 %s, %.2f s\n", index + 1,
                     count, job.name.c_str(), result.energy, recall.is_null() ? "-" : recall.dump().c_str(),
                     load_seconds + result.seconds.total + write_seconds + evaluate_seconds);
    }
    return row;
}

std::string csv_field(const nlohmann::json& value) {
    if (value.is_null()) {
        return "";
    }
    std::string text = value.is_string() ? value.get<std::string>() : value.dump();
    if (text.find_first_of(",\"\n") != std::string::npos) {
        std::string quoted = "\"";
        for (char c : text) {
            quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
        }
        return quoted + "\"";
    }
    return text;
}

// Rewritten whole after every job, each under a temporary name, so that a killed batch still leaves
// a valid summary of the jobs it finished.
void write_summary(const std::string& folder, const nlohmann::json& rows) {
    AtomicFile json((fs::path(folder) / "summary.json").string());
    json.stream() << rows.dump(2) << '\n';
    json.commit();

    static const char* const kColumns[] = {"dataset", "file", "n", "d", "m", "bytes_per_vector", "ratio", "residuals",
                                           "energy", "mse", "recall_at_10"};
    static const char* const kSeconds[] = {"load", "init", "fit", "evaluate", "write"};
    AtomicFile csv((fs::path(folder) / "summary.csv").string());
    for (const char* column : kColumns) {
        csv.stream() << column << ',';
    }
    for (const char* phase : kSeconds) {
        csv.stream() << phase << "_seconds,";
    }
    csv.stream() << "device,status,error\n";
    for (const nlohmann::json& row : rows) {
        for (const char* column : kColumns) {
            csv.stream() << csv_field(row.value(column, nlohmann::json())) << ',';
        }
        for (const char* phase : kSeconds) {
            const nlohmann::json seconds = row.value("seconds", nlohmann::json::object());
            csv.stream() << csv_field(seconds.value(phase, nlohmann::json())) << ',';
        }
        csv.stream() << csv_field(row["device"]) << ',' << csv_field(row["status"]) << ',' << csv_field(row["error"])
                     << '\n';
    }
    csv.commit();
}

int batch(int argc, char** argv) {
    BatchArgs args;
    po::variables_map values;
    if (!parse_command_line(argc, argv, kHelp, [&](po::options_description& o) { add_options(o, args); }, values)) {
        return 0;
    }
    if (values.count("input")) {
        args.files = values["input"].as<std::vector<std::string>>();
    }
    // collect_jobs checks every job's copy of these again, as a manifest changes some of them; checked
    // first here, a bad option is named as the command's own, not as job 1's.
    check_anneal_args(args.anneal);
    check_coding_args(values, args.coding);
    if (args.output.empty()) {
        throw UsageError("-o: the output folder's path is empty");
    }
    const std::vector<Job> jobs = collect_jobs(args, budget_given(values));
    std::vector<NamedPath> outputs;
    std::vector<NamedPath> inputs = {{"--manifest", args.manifest}};
    for (std::size_t i = 0; i < jobs.size(); ++i) {
        const Outputs out = outputs_of(args.output, jobs[i]);
        const std::string job = "job " + std::to_string(i + 1) + "'s";
        outputs.push_back({job + " .vlat", out.vlat});
        outputs.push_back({job + " results", out.results});
        inputs.push_back({job + " file", jobs[i].file});
    }
    for (const char* summary : {"summary.json", "summary.csv"}) {
        outputs.push_back({"the summary", (fs::path(args.output) / summary).string()});
    }
    check_outputs(outputs, inputs);
    std::error_code not_created;
    fs::create_directories(args.output, not_created);
    if (not_created || !fs::is_directory(args.output)) {
        throw Error(args.output + ": cannot create the output folder (" +
                    (not_created ? not_created.message() : "a file of that name exists") + ")");
    }

    nlohmann::json rows = nlohmann::json::array();
    bool failed = false;
    for (std::size_t i = 0; i < jobs.size(); ++i) {
        const Job& job = jobs[i];
        const Outputs out = outputs_of(args.output, job);
        if (!args.quiet) {
            std::fprintf(stderr, "vlattice batch: job %zu of %zu: %s (%s)\n", i + 1, jobs.size(), job.name.c_str(),
                         job.file.c_str());
        }
        if (!args.force && outputs_verify(out)) {
            nlohmann::json row = read_results_metrics(out.results);
            row["status"] = "skipped";
            rows.push_back(row);
            if (!args.quiet) {
                std::fprintf(stderr, "vlattice batch: job %zu of %zu: %s: outputs verify, skipped\n", i + 1,
                             jobs.size(), job.name.c_str());
            }
        } else {
            try {
                rows.push_back(run_job(job, i, jobs.size(), args, values, out));
            } catch (const std::exception& e) {
                failed = true;
                rows.push_back({{"dataset", job.name}, {"file", job.file}, {"device", job.device},
                                {"status", "failed"}, {"error", e.what()}});
                print_notice(kHelp.name, "error", "job " + std::to_string(i + 1) + " (" + job.name + "): " + e.what());
            }
        }
        write_summary(args.output, rows);
    }
    return failed ? kExitData : 0;
}

}  // namespace

int run_batch(int argc, char** argv) {
    return run_guarded(kHelp.name, [&] { return batch(argc, argv); });
}

}  // namespace vlattice::cli
