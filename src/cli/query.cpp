// vlattice query IN.vlat --queries FILE: k-NN over the compressed set, with recall when the true
// neighbours are known.
#include "activity.hpp"
#include "commands.hpp"
#include "device_note.hpp"
#include "encoded_vectors.hpp"
#include "input_files.hpp"
#include "number_options.hpp"
#include "options.hpp"

#include "vlattice/device.hpp"
#include "vlattice/format.hpp"
#include "vlattice/io.hpp"
#include "vlattice/memory.hpp"
#include "vlattice/pipeline.hpp"
#include "vlattice/search.hpp"
#ifdef VLATTICE_HAVE_CUDA
#include "vlattice/cuda_search.hpp"
#endif

#include <nlohmann/json.hpp>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>

namespace vlattice::cli {

namespace {

const CommandHelp kHelp{
    "query",
    "IN.vlat --queries FILE [--k 10] [--nprobe P|all] [--rerank N] [--ground-truth FILE[:DATASET]] [options]",
    "IN.vlat",
    "Finds the k nearest neighbours of each query among the vectors of IN.vlat, IVF\n"
    "style: each query is scored against the anchors, and the members of its nprobe\n"
    "best anchors are ranked by their score against their reconstruction (anchor\n"
    "plus decoded residual). The file's metric sets the score: l2 and angular take\n"
    "the smallest squared L2 distances and report them squared (no square root); ip\n"
    "takes the largest inner products and reports the inner products. Ties go to\n"
    "the lowest id. --nprobe all scores every vector (exhaustive).\n"
    "Files of product codes are ranked by asymmetric distance instead (each code\n"
    "against the query through the query's lookup tables, without decoding);\n"
    "--rerank N scores the best max(k, N) of those again against their\n"
    "reconstruction and reports the k best with those scores.\n"
    "Prints queries per second and, with --ground-truth (ids, one row per query, as\n"
    "an ann-benchmarks file's `neighbors`), r-recall@r for r = 1, 10, 100 up to k;\n"
    "an r beyond the ground truth's ids per query is left out, with a note saying so.\n"
    "Queries of a file made with --metric angular are normalised first; those of an\n"
    "ip file are used as given.",
};

constexpr std::size_t kShownQueries = 3;

struct QueryArgs {
    std::string input;
    std::string queries;
    std::string dataset;
    long long k = static_cast<long long>(SearchOptions{}.k);
    std::string nprobe;
    long long rerank = 0;
    std::string ground_truth;
    long long limit = 0;
    std::string output;
    std::string device;
    int gpu = 0;
    int threads = 0;
    bool json = false;
    bool quiet = false;
};

void add_options(po::options_description& options, QueryArgs& a) {
    options.add_options()
        ("queries", po::value(&a.queries)->required()->value_name("FILE"), "query vectors, any format compress reads")
        ("dataset", po::value(&a.dataset)->default_value("test")->value_name("NAME"), "dataset of an HDF5 --queries")
        ("k", whole_number(&a.k, 1LL)->default_value(a.k)->value_name("K"),
         "neighbours per query, from 1 to the number of vectors in IN.vlat")
        ("nprobe", po::value(&a.nprobe)->default_value("16")->value_name("P"),
         "anchors visited per query, or `all` for exhaustive search")
        ("rerank", whole_number(&a.rerank, 0LL)->default_value(0)->value_name("N"),
         "product codes: score the best max(k, N) by asymmetric distance again against their reconstruction and "
         "report the k best of them (0: the asymmetric distances); other files are ranked by their "
         "reconstruction already")
        ("ground-truth", po::value(&a.ground_truth)->value_name("FILE[:DATASET]"),
         "true neighbour ids, one row per query of --queries, in their order: an HDF5 file's dataset "
         "(`neighbors` by default), .ivecs, .npy of int32 or int64 (as numpy and FAISS write them), or any "
         "vector file of whole numbers")
        ("limit", whole_number(&a.limit, 0LL)->default_value(0)->value_name("N"),
         "use only the first N queries (0: all)")
        ("output,o", po::value(&a.output)->value_name("FILE.hdf5"),
         "write datasets `neighbors` (int64, -1 where fewer than k were visited) and `distances` (float32: "
         "squared L2, +inf where no neighbour; inner products for an ip file, -inf where none), and the "
         "attribute `distance` (squared_l2 or inner_product)")
        ("device", po::value(&a.device)->default_value("auto")->value_name("KIND"),
         "auto (the GPU when one is usable, else the CPU), cpu, or cuda; both give the same answer")
        ("gpu", whole_number(&a.gpu, 0)->default_value(0)->value_name("N"), "which GPU")
        ("threads", whole_number(&a.threads, 0)->default_value(0)->value_name("N"), "CPU threads (0: every core)")
        ("json", po::bool_switch(&a.json),
         "print one JSON object: settings (with the file's `metric` and what the distances are, `distance`: "
         "squared_l2 or inner_product), timing, recall, ids and distances (null where no neighbour)")
        ("quiet,q", po::bool_switch(&a.quiet),
         "print nothing but errors and the recall asked for by --ground-truth (--json still prints the JSON)");
}

std::size_t parse_nprobe(const std::string& text) {
    if (text == "all") {
        return 0;
    }
    const UsageError refused("--nprobe must be a whole number >= 1 or `all`, got '" + text + "'");
    std::uint64_t value = 0;
    try {
        value = parse_unsigned_option(text, "--nprobe");
    } catch (const UsageError&) {
        throw refused;
    }
    if (value < 1) {
        throw refused;
    }
    return static_cast<std::size_t>(value);
}

// FILE[:DATASET]: the dataset part only where FILE is an HDF5 file, so that other paths may hold ':'.
std::pair<std::string, std::string> split_ground_truth(const std::string& text) {
    for (const std::string extension : {".hdf5:", ".h5:"}) {
        const std::size_t at = text.rfind(extension);
        if (at != std::string::npos) {
            const std::size_t colon = at + extension.size() - 1;
            return {text.substr(0, colon), text.substr(colon + 1)};
        }
    }
    return {text, "neighbors"};
}

// The first `count` rows (all of them for 0): of the queries (Matrix) or of their ground truth (IdMatrix).
template <class Table>
Table first_rows(Table table, std::size_t count) {
    if (count > 0 && count < table.rows) {
        table.rows = count;
        table.data.resize(count * table.cols);
    }
    return table;
}

// The true neighbours of every query of --queries (one row each, so that row q is query q's),
// cut to the queries --limit keeps; every id must name a vector of the file.
IdMatrix read_ground_truth(const std::string& path, const std::string& dataset, const std::string& name,
                           std::size_t query_count, std::size_t kept, std::uint64_t n) {
    ReadOptions read;
    read.dataset = dataset;
    IdMatrix truth = during("reading --ground-truth " + name, [&] { return read_ids(path, read); });
    if (truth.rows != query_count) {
        throw Error(name + ": " + std::to_string(truth.rows) + " rows of true neighbours for " +
                    std::to_string(query_count) + " queries; a ground truth has one row per query, in their order");
    }
    truth = first_rows(std::move(truth), kept);
    check_vector_ids(truth, n, name);
    return truth;
}

void print_recall(const nlohmann::json& recall) {
    for (const auto& [name, value] : recall.items()) {
        std::printf("recall      %s %.4f\n", name.c_str(), value.get<double>());
    }
}

int query(int argc, char** argv) {
    QueryArgs args;
    po::variables_map values;
    if (!parse_command_line(argc, argv, kHelp, [&](po::options_description& o) { add_options(o, args); }, values)) {
        return 0;
    }
    args.input = values["input"].as<std::string>();
    const std::vector<NamedPath> inputs = {{"INPUT", args.input},
                                           {"--queries", args.queries},
                                           {"--ground-truth", split_ground_truth(args.ground_truth).first}};
    check_outputs({{"-o", args.output}}, inputs);
    if (!args.output.empty()) {
        check_search_results_output(args.output);
    }
    // With --json only the JSON goes out, as for the GPU note.
    clear_stale_temporaries(kHelp.name, {{"-o", args.output}}, args.json);
    SearchOptions search_options;
    search_options.k = static_cast<std::size_t>(args.k);
    search_options.nprobe = parse_nprobe(args.nprobe);
    search_options.rerank = static_cast<std::size_t>(args.rerank);
    const DeviceKind device = parse_option_value([&] { return parse_device(args.device); });
    check_inputs(inputs);
    if (args.threads > 0) {
        omp_set_num_threads(args.threads);
    }

    const VlatFile file = read_encoded_vectors(args.input);
    require_option(static_cast<std::uint64_t>(args.k) <= file.n, "--k",
                   ("at most the number of vectors in " + args.input + " (" + std::to_string(file.n) + ")").c_str(),
                   args.k);
    ReadOptions query_read;
    query_read.dataset = args.dataset;
    Matrix queries =
        during("reading --queries " + args.queries, [&] { return load_points(args.queries, query_read, file.metric); })
            .points;
    const std::size_t query_count = queries.rows;
    queries = first_rows(std::move(queries), static_cast<std::size_t>(args.limit));
    if (queries.cols != file.d) {
        throw Error(args.queries + ": the queries have " + std::to_string(queries.cols) + " dimensions, " + args.input +
                    " has " + std::to_string(file.d));
    }
    const std::string results = count_text(queries.rows) + " x " + count_text(search_options.k);
    check_memory("--k " + std::to_string(args.k) + " for " + count_text(queries.rows) + " queries: " + results +
                     " neighbours (ids and distances)",
                 table_bytes(queries.rows, search_options.k, sizeof(std::int64_t) + sizeof(float)));
    IdMatrix truth;
    std::string truth_name;
    if (!args.ground_truth.empty()) {
        const auto [path, dataset] = split_ground_truth(args.ground_truth);
        truth_name = is_hdf5_path(path) ? path + ":" + dataset : path;
        truth = read_ground_truth(path, dataset, truth_name, query_count, queries.rows, file.n);
    }
    const GpuChoice gpu = choose_gpu(device, args.gpu);
    // Notes would not be JSON: --json prints nothing else on stdout, and keeps stderr for errors.
    const bool quiet = args.quiet || args.json;
    print_device_note(kHelp.name, gpu.note, quiet);

    const auto start = std::chrono::steady_clock::now();
    const Neighbors found = during("searching", [&] {
#ifdef VLATTICE_HAVE_CUDA
        return gpu.use ? search_cuda(file, queries, search_options, args.gpu) : search(file, queries, search_options);
#else
        return search(file, queries, search_options);
#endif
    });
    const double seconds = seconds_since(start);
    if (!args.output.empty()) {
        during("writing -o " + args.output, [&] { write_search_results(args.output, found, file.metric); });
    }

    const std::size_t m = file.anchors.rows;
    const std::size_t probed = search_options.nprobe == 0 ? m : std::min(search_options.nprobe, m);
    nlohmann::json report = {
        {"file", args.input},
        {"queries", queries.rows},
        {"k", search_options.k},
        {"nprobe", probed},
        {"rerank", search_options.rerank},
        {"anchors", m},
        {"metric", metric_name(file.metric)},
        {"distance", distance_name(file.metric)},
        {"device", gpu.use ? "cuda" : "cpu"},
        {"seconds", seconds},
        {"queries_per_second", static_cast<double>(queries.rows) / seconds},
        {"visited_per_query", static_cast<double>(found.visited) / static_cast<double>(queries.rows)},
        {"recall", nlohmann::json::object()},
    };
    if (!truth_name.empty()) {
        report["ground_truth"] = truth_name;
        for (const std::size_t r : {1, 10, 100}) {
            const std::string name = std::to_string(r) + "-recall@" + std::to_string(r);
            if (r > search_options.k) {
                continue;
            }
            if (r > truth.cols) {
                // Said rather than silently dropped: the user asked for a k this recall belongs to.
                const std::string why = "the ground truth has " + std::to_string(truth.cols) + " ids per query";
                report["recall_left_out"][name] = why;
                if (!quiet) {
                    print_notice(kHelp.name, "note", name + " left out: " + why);
                }
                continue;
            }
            report["recall"][name] = recall_at(found, truth, r);
        }
    }
    if (args.json) {
        const Activity printing("printing the neighbours as JSON");
        report["ids"] = nlohmann::json::array();
        report["distances"] = nlohmann::json::array();
        for (std::size_t q = 0; q < found.queries; ++q) {
            const auto row = static_cast<std::ptrdiff_t>(q * found.k);
            const auto end = row + static_cast<std::ptrdiff_t>(found.k);
            report["ids"].push_back(std::vector<std::int64_t>(found.ids.begin() + row, found.ids.begin() + end));
            // JSON has no infinity: a missing neighbour's distance is null.
            nlohmann::json distances = nlohmann::json::array();
            for (auto it = found.distances.begin() + row; it != found.distances.begin() + end; ++it) {
                distances.push_back(std::isfinite(*it) ? nlohmann::json(*it) : nlohmann::json(nullptr));
            }
            report["distances"].push_back(distances);
        }
        std::cout << report.dump() << '\n';
        return 0;
    }
    if (args.quiet) {
        print_recall(report["recall"]);
        return 0;
    }
    std::printf("queries     %zu x %zu from %s\n", queries.rows, queries.cols, args.queries.c_str());
    std::printf("search      k = %zu, nprobe %zu of %zu anchors, %s; distances are %s\n", search_options.k, probed, m,
                gpu.use ? "cuda" : "cpu", file.metric == Metric::ip ? "inner products" : "squared L2");
    std::printf("visited     %.1f vectors per query (%.2f %% of %llu)\n", report["visited_per_query"].get<double>(),
                100.0 * report["visited_per_query"].get<double>() / static_cast<double>(file.n),
                static_cast<unsigned long long>(file.n));
    std::printf("speed       %.1f queries per second (%.4f s)\n", report["queries_per_second"].get<double>(), seconds);
    print_recall(report["recall"]);
    for (std::size_t q = 0; q < std::min(kShownQueries, found.queries); ++q) {
        std::printf("query %zu:", q);
        for (std::size_t r = 0; r < std::min<std::size_t>(found.k, 10); ++r) {
            std::printf(" %lld (%.6g)", static_cast<long long>(found.ids[q * found.k + r]), found.distances[q * found.k + r]);
        }
        std::printf("%s\n", found.k > 10 ? " ..." : "");
    }
    return 0;
}

}  // namespace

int run_query(int argc, char** argv) {
    return run_guarded(kHelp.name, [&] { return query(argc, argv); });
}

}  // namespace vlattice::cli
