// vlattice batch [FILE ...] [--manifest M] -o OUTDIR [--force]: one compression per input file,
// written as OUTDIR/<name>.vlat and OUTDIR/<name>.results.h5, scored on an HDF5 file's `test`
// against its `neighbors` when it has both, and one row per job in OUTDIR/summary.csv and
// summary.json. A job that fails leaves its row with the reason and the others run on; finished
// jobs whose outputs were made from the same input bytes and options are skipped on the next run
// unless --force. One batch at a time writes a folder (folder_lock.hpp). Under mpirun or srun the
// ranks share the jobs out (batch_rounds.hpp) and rank 0 writes the summary.
#include "batch_job.hpp"
#include "batch_jobs.hpp"
#include "batch_resume.hpp"
#include "batch_rounds.hpp"
#include "batch_summary.hpp"
#include "commands.hpp"
#include "device_note.hpp"
#include "folder_lock.hpp"
#include "number_options.hpp"
#include "options.hpp"
#include "process_ranks.hpp"

#include "vlattice/collective.hpp"
#include "vlattice/file_fingerprint.hpp"
#include "vlattice/results_file.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <optional>

namespace vlattice::cli {

namespace {

namespace fs = std::filesystem;

const CommandHelp kHelp{
    "batch",
    "[FILE ...] [--manifest M] -o OUTDIR [options]",
    "FILE",
    "Compresses each FILE (any input compress reads: an HDF5 file's `train`, or\n"
    "--dataset, as in the ann-benchmarks layout; .npy, .fvecs, .bvecs, .ivecs, .fbin,\n"
    ".u8bin) into OUTDIR/<name>.vlat and OUTDIR/<name>.results.h5 (anchors,\n"
    "assignments, and the run's config and metrics as attributes). When an HDF5 file\n"
    "also holds `test` and `neighbors`, 10-recall@10 of exhaustive search over the\n"
    "reconstructed vectors, ranked as query ranks them (ip: largest inner product),\n"
    "is measured; other inputs have no test queries, and their recall is left empty.\n"
    "Every job adds a row to OUTDIR/summary.csv and\n"
    "summary.json; a failed job records its reason and the batch goes on, ending\n"
    "with exit status 1. A job's two outputs appear together, only when the whole\n"
    "job succeeded. A finished job is skipped on the next run, unless --force, when\n"
    "its outputs verify and were made from the same input bytes with the same\n"
    "options (all but --device, --gpu, --gpu-memory, --kernel, --threads and\n"
    "--validate-every, which change only how the result is computed); otherwise it\n"
    "runs again, and the summary's\n"
    "`redone` column says why. So an interrupted batch resumes where it stopped.\n"
    "One batch at a time writes to an output folder; a second is refused.\n"
    "A manifest is JSON: {\"jobs\": [{\"file\": \"a.hdf5\", \"name\": \"a\", \"anchors\": 512,\n"
    "\"metric\": \"angular\", \"device\": \"cpu\", \"dataset\": \"train\", \"bits\": 4}, ...]}; paths\n"
    "are relative to the manifest, and every key but \"file\" overrides the options.\n"
    "Under mpirun or srun (`mpirun -np R vlattice batch ...`) the R processes share\n"
    "the jobs out, one job each at a time, the largest inputs first, with the same\n"
    "resume rules; the output folder must be one that every process sees. Rank 0\n"
    "holds the folder's lock and writes the one summary, in job order, after every\n"
    "round of R jobs.",
    true,
};

// In the output folder, beside the outputs; flock'ed, never removed (removing it would let a
// third batch lock a new file while the second still holds the old one).
constexpr const char* kLockName = ".vlattice-batch.lock";

void add_options(po::options_description& options, BatchArgs& a) {
    options.add_options()
        ("output,o", po::value(&a.output)->required()->value_name("OUTDIR"),
         "folder for the outputs and the summary (created when missing)")
        ("manifest", po::value(&a.manifest)->value_name("FILE"), "JSON list of jobs, beside or instead of FILEs")
        ("force", po::bool_switch(&a.force), "run every job, also those whose finished outputs would be kept");
    add_anneal_options(options, a.anneal);
    add_coding_options(options, a.coding);
    options.add_options()
        ("device", po::value(&a.device)->default_value("auto")->value_name("KIND"),
         "auto (the GPU when one is usable, else the CPU), cpu, or cuda")
        ("train-sample", whole_number(&a.train_sample, 0LL)->default_value(0)->value_name("N"),
         "each job fits its anchors and trains its residual code on N of its rows drawn with --seed, then "
         "assigns and codes every row; 0 (or N >= the rows): train on every row")
        ("quiet,q", po::bool_switch(&a.quiet), "print nothing but errors");
}

// Checks every output against the inputs and the others, and (`sweep`) removes what killed runs left for them.
void check_paths(const BatchArgs& args, const std::vector<Job>& jobs, bool sweep) {
    std::vector<NamedPath> outputs;
    std::vector<NamedPath> inputs = {{"--manifest", args.manifest}};
    for (std::size_t i = 0; i < jobs.size(); ++i) {
        const JobOutputs out = outputs_of(args.output, jobs[i]);
        const std::string job = "job " + std::to_string(i + 1) + "'s";
        outputs.push_back({job + " .vlat", out.vlat});
        outputs.push_back({job + " results", out.results});
        inputs.push_back({job + " file", jobs[i].file});
    }
    for (const char* summary : {"summary.json", "summary.csv"}) {
        outputs.push_back({"the summary", (fs::path(args.output) / summary).string()});
    }
    check_outputs(outputs, inputs);
    if (sweep) {
        clear_stale_temporaries(kHelp.name, outputs, args.quiet);
    }
}

// The bytes of each job's input, as rank 0 sees them, on every rank: they decide who runs what.
std::vector<std::uint64_t> input_sizes(const std::vector<Job>& jobs, Collective& ranks) {
    std::vector<std::uint64_t> sizes(jobs.size(), 0);
    if (ranks.rank() == 0) {
        for (std::size_t i = 0; i < jobs.size(); ++i) {
            std::error_code unreadable;  // the job itself reports a missing input
            const std::uintmax_t bytes = fs::file_size(jobs[i].file, unreadable);
            sizes[i] = unreadable ? 0 : static_cast<std::uint64_t>(bytes);
        }
    }
    ranks.sum(sizes.data(), sizes.size());
    return sizes;
}

// Runs the job, or keeps its finished outputs when they stand for this run; returns its row.
nlohmann::json run_or_reuse(const Job& job, JobPlan& plan, const BatchArgs& args, const po::variables_map& values) {
    plan.metric = metric_of(job.anneal, job.file);
    plan.input = file_fingerprint(job.file);
    plan.options = job_options(job, plan.metric, values, args.coding);
    std::string redone;
    if (!args.force) {
        const Reuse reuse = check_finished_job(plan.outputs, plan.input, plan.options);
        if (reuse.reuse) {
            nlohmann::json row = read_results_metrics(plan.outputs.results);
            row["status"] = "skipped";
            if (!args.quiet) {
                std::fprintf(stderr,
                             "vlattice batch: job %zu of %zu: %s: skipped: its outputs verify and were made from the "
                             "same input and options\n",
                             plan.index + 1, plan.count, job.name.c_str());
            }
            return row;
        }
        redone = reuse.redo_reason;
        if (!redone.empty() && !args.quiet) {
            std::fprintf(stderr, "vlattice batch: job %zu of %zu: %s: redone: %s\n", plan.index + 1, plan.count,
                         job.name.c_str(), redone.c_str());
        }
    }
    nlohmann::json row = run_job(job, plan, args, values);
    row["redone"] = redone;
    return row;
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
    Collective& ranks = process_ranks() != nullptr ? *process_ranks() : single_process();
    const bool lead = ranks.rank() == 0;
    // Rank 0 alone sweeps and locks, and the others start no job until it has: a rank that fails
    // here ends every rank's run.
    check_paths(args, jobs, lead);
    std::optional<FolderLock> lock;
    if (lead) {
        std::error_code not_created;
        fs::create_directories(args.output, not_created);
        if (not_created || !fs::is_directory(args.output)) {
            throw Error(args.output + ": cannot create the output folder (" +
                        (not_created ? not_created.message() : "a file of that name exists") + ")");
        }
        lock.emplace(args.output, kLockName);
    }
    const std::vector<std::vector<std::size_t>> rounds = job_rounds(input_sizes(jobs, ranks), ranks.size());
    const std::string on_rank =
        ranks.size() > 1 ? " on rank " + std::to_string(ranks.rank()) + " of " + std::to_string(ranks.size()) : "";

    std::vector<nlohmann::json> rows(jobs.size());  // null until the job has run
    for (const std::vector<std::size_t>& round : rounds) {
        const std::size_t i = round[static_cast<std::size_t>(ranks.rank())];
        nlohmann::json row;
        if (i != kNoJob) {
            const Job& job = jobs[i];
            if (!args.quiet) {
                std::fprintf(stderr, "vlattice batch: job %zu of %zu: %s (%s)%s\n", i + 1, jobs.size(),
                             job.name.c_str(), job.file.c_str(), on_rank.c_str());
            }
            JobPlan plan;
            plan.index = i;
            plan.count = jobs.size();
            plan.outputs = outputs_of(args.output, job);
            try {
                row = run_or_reuse(job, plan, args, values);
            } catch (const std::exception& e) {
                row = {{"dataset", job.name}, {"file", job.file}, {"device", job.device}, {"status", "failed"},
                       {"error", e.what()}};
                print_notice(kHelp.name, "error", "job " + std::to_string(i + 1) + " (" + job.name + "): " + e.what());
            }
        }
        if (ranks.size() == 1) {
            rows[i] = std::move(row);
        } else {
            const std::vector<std::string> texts = gather_texts(
                ranks, row.is_null() ? "" : row.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
            for (std::size_t k = 0; k < texts.size(); ++k) {
                if (round[k] != kNoJob) {
                    rows[round[k]] = nlohmann::json::parse(texts[k]);
                }
            }
        }
        if (lead) {
            nlohmann::json done = nlohmann::json::array();
            for (const nlohmann::json& finished : rows) {
                if (!finished.is_null()) {
                    done.push_back(finished);
                }
            }
            write_summary(args.output, done);
        }
    }
    bool failed = false;
    for (const nlohmann::json& row : rows) {
        failed = failed || row.value("status", "") == "failed";
    }
    return failed ? kExitData : 0;
}

}  // namespace

int run_batch(int argc, char** argv) {
    return run_guarded(kHelp.name, [&] { return batch(argc, argv); });
}

}  // namespace vlattice::cli
