// vlattice query IN.vlat --queries FILE: k-NN over the compressed set, with recall when the true
// neighbours are known.
#include "commands.hpp"
#include "number_options.hpp"
#include "options.hpp"

#include "vlattice/device.hpp"
#include "vlattice/format.hpp"
#include "vlattice/io.hpp"
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
    "IN.vlat --queries FILE [--k 10] [--nprobe P|all] [--ground-truth FILE[:DATASET]] [options]",
    "IN.vlat",
    "Finds the k nearest neighbours of each query among the vectors of IN.vlat, IVF\n"
    "style: each query is scored against the anchors, and the members of its nprobe\n"
    "best anchors are ranked by their score against their reconstruction (anchor\n"
    "plus decoded residual). The file's metric sets the score: l2 and angular take\n"
    "the smallest squared L2 distances and report them squared (no square root); ip\n"
    "takes the largest inner products and reports the inner products. Ties go to\n"
    "the lowest id. --nprobe all scores every vector (exhaustive).\n"
    "Prints queries per second and, with --ground-truth (ids, one row per query, as\n"
    "an ann-benchmarks file's `neighbors`), r-recall@r for r = 1, 10, 100 up to k.\n"
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
    std::string ground_truth;
    long long limit = 0;
    std::string output;
    std::string device;
    int gpu = 0;
    int threads = 0;
    bool json = false;
};

void add_options(po::options_description& options, QueryArgs& a) {
    options.add_options()
        ("queries", po::value(&a.queries)->required()->value_name("FILE"), "query vectors, any format compress reads")
        ("dataset", po::value(&a.dataset)->default_value("test")->value_name("NAME"), "dataset of an HDF5 --queries")
        ("k", whole_number(&a.k, 1LL)->default_value(a.k)->value_name("K"), "neighbours per query")
        ("nprobe", po::value(&a.nprobe)->default_value("16")->value_name("P"),
         "anchors visited per query, or `all` for exhaustive search")
        ("ground-truth", po::value(&a.ground_truth)->value_name("FILE[:DATASET]"),
         "true neighbour ids per query (an HDF5 file's dataset, `neighbors` by default; or .ivecs, .npy ...)")
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
         "squared_l2 or inner_product), timing, recall, ids and distances (null where no neighbour)");
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

Matrix first_rows(Matrix matrix, std::size_t count) {
    if (count > 0 && count < matrix.rows) {
        matrix.rows = count;
        matrix.data.resize(count * matrix.cols);
    }
    return matrix;
}

int query(int argc, char** argv) {
    QueryArgs args;
    po::variables_map values;
    if (!parse_command_line(argc, argv, kHelp, [&](po::options_description& o) { add_options(o, args); }, values)) {
        return 0;
    }
    args.input = values["input"].as<std::string>();
    check_outputs({{"-o", args.output}}, {{"INPUT", args.input},
                                                   {"--queries", args.queries},
                                                   {"--ground-truth", split_ground_truth(args.ground_truth).first}});
    if (!args.output.empty()) {
        check_search_results_output(args.output);
    }
    // With --json only the JSON goes out, as for the GPU note.
    clear_stale_temporaries(kHelp.name, {{"-o", args.output}}, args.json);
    SearchOptions search_options;
    search_options.k = static_cast<std::size_t>(args.k);
    search_options.nprobe = parse_nprobe(args.nprobe);
    const DeviceKind device = parse_option_value([&] { return parse_device(args.device); });
    if (args.threads > 0) {
        omp_set_num_threads(args.threads);
    }

    const VlatFile file = read_vlat(args.input);
    ReadOptions query_read;
    query_read.dataset = args.dataset;
    const Matrix queries = first_rows(load_points(args.queries, query_read, file.metric).points,
                                        static_cast<std::size_t>(args.limit));
    if (queries.cols != file.d) {
        throw Error(args.queries + ": the queries have " + std::to_string(queries.cols) + " dimensions, " + args.input +
                    " has " + std::to_string(file.d));
    }
    Matrix truth;
    std::string truth_name;
    if (!args.ground_truth.empty()) {
        const auto [path, dataset] = split_ground_truth(args.ground_truth);
        truth_name = is_hdf5_path(path) ? path + ":" + dataset : path;
        ReadOptions truth_read;
        truth_read.dataset = dataset;
        truth = first_rows(read_vectors(path, truth_read), queries.rows);
        if (truth.rows != queries.rows) {
            throw Error(truth_name + ": " + std::to_string(truth.rows) + " rows of true neighbours for " +
                        std::to_string(queries.rows) + " queries");
        }
        check_neighbor_ids(truth, file.n, truth_name);
    }
    const GpuChoice gpu = choose_gpu(device, args.gpu);
    if (!gpu.note.empty() && !args.json) {
        print_notice(kHelp.name, "note", gpu.note);
    }

    const auto start = std::chrono::steady_clock::now();
#ifdef VLATTICE_HAVE_CUDA
    const Neighbors found = gpu.use ? search_cuda(file, queries, search_options, args.gpu)
                                    : search(file, queries, search_options);
#else
    const Neighbors found = search(file, queries, search_options);
#endif
    const double seconds = seconds_since(start);
    if (!args.output.empty()) {
        write_search_results(args.output, found, file.metric);
    }

    const std::size_t m = file.anchors.rows;
    const std::size_t probed = search_options.nprobe == 0 ? m : std::min(search_options.nprobe, m);
    nlohmann::json report = {
        {"file", args.input},
        {"queries", queries.rows},
        {"k", search_options.k},
        {"nprobe", probed},
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
            if (r <= search_options.k && r <= truth.cols) {
                report["recall"][std::to_string(r) + "-recall@" + std::to_string(r)] = recall_at(found, truth, r);
            }
        }
    }
    if (args.json) {
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
    std::printf("queries     %zu x %zu from %s\n", queries.rows, queries.cols, args.queries.c_str());
    std::printf("search      k = %zu, nprobe %zu of %zu anchors, %s; distances are %s\n", search_options.k, probed, m,
                gpu.use ? "cuda" : "cpu", file.metric == Metric::ip ? "inner products" : "squared L2");
    std::printf("visited     %.1f vectors per query (%.2f %% of %llu)\n", report["visited_per_query"].get<double>(),
                100.0 * report["visited_per_query"].get<double>() / static_cast<double>(file.n),
                static_cast<unsigned long long>(file.n));
    std::printf("speed       %.1f queries per second (%.4f s)\n", report["queries_per_second"].get<double>(), seconds);
    for (const auto& [name, value] : report["recall"].items()) {
        std::printf("recall      %s %.4f\n", name.c_str(), value.get<double>());
    }
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
