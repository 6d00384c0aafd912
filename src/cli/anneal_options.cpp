#include "anneal_options.hpp"

#include "activity.hpp"
#include "number_options.hpp"
#include "progress.hpp"

#include "vlattice/io.hpp"
#include "vlattice/memory.hpp"
#include "vlattice/model.hpp"

#include <algorithm>
#include <optional>

#include <unistd.h>

namespace vlattice::cli {

void add_anneal_options(po::options_description& options, AnnealArgs& a) {
    const AnnealConfig c;
    const long long anchors = static_cast<long long>(c.anchors);
    const std::string dataset = ReadOptions{}.dataset;
    const std::string min_gain = "once cold (T = 0), stop when the energy gains less than G of itself per iteration for " +
                                 std::to_string(c.patience) + " iterations in a row (while hot, go cold instead); "
                                 "0: run until the assignments stop changing, or --iters";
    options.add_options()
        ("anchors,m", whole_number(&a.anchors, 1LL)->default_value(anchors, show(anchors))->value_name("M"),
         "anchors to learn, 1 <= M <= number of vectors; anchors left empty are dropped, so a run may end with fewer")
        ("iters", whole_number(&a.config.max_iters, 1)->default_value(c.max_iters, show(c.max_iters))->value_name("N"),
         "maximum iterations; the run stops earlier when converged")
        ("min-gain", real_number(&a.config.min_gain, {0.0})->default_value(c.min_gain, show(c.min_gain))
                         ->value_name("G"),
         min_gain.c_str())
        ("t0", real_number(&a.config.t0, {0.0})->default_value(c.t0, show(c.t0))->value_name("T"),
         "initial temperature, >= 0; hot iterations trim more outliers and move anchors part of the way, "
         "0 runs cold (plain Lloyd steps with --trim-final) from the start")
        ("cooling", real_number(&a.config.cooling, {0.0, 1.0})
                        ->default_value(c.cooling, show(c.cooling))->value_name("C"),
         "T <- T * (1 - C) after every iteration, C in [0, 1)")
        ("trim", real_number(&a.config.trim, {0.0, 1.0})->default_value(c.trim, show(c.trim))->value_name("F"),
         "share of each anchor's farthest members left out of its mean at T = T0, in [0, 1)")
        ("trim-final", real_number(&a.config.trim_final, {0.0, 1.0})
                           ->default_value(c.trim_final, show(c.trim_final))->value_name("F"),
         "share left out at T = 0, in [0, 1); 0 ends at a k-means fixed point, = --trim gives trimmed k-means")
        ("maintenance-every", whole_number(&a.config.maintenance_every, 0)
                                  ->default_value(c.maintenance_every, show(c.maintenance_every))->value_name("P"),
         "merge close anchors, split crowded ones and re-seed empty ones every P iterations while hot; 0 turns it off")
        ("init-sample", whole_number(&a.init_sample, 0LL)->default_value(0)->value_name("S"),
         "k-means++ picks the first anchors from a random sample of S points; 0: min(n, 8 * M)")
        ("seed", po::value(&a.seed)->default_value(show(c.seed))->value_name("S"),
         "seeds every random choice; the same input, seed and backend give the same result on any machine "
         "(compress: a byte-identical file)")
        ("metric", po::value(&a.metric)->default_value("auto")->value_name("NAME"),
         "l2; angular (every vector scaled to unit length on load); or ip (inner product, `dot` also: the "
         "vectors as given, query ranks by largest inner product). Every metric fits the anchors in L2, since "
         "compression minimises the squared reconstruction error. auto: an HDF5 input's 'distance' attribute "
         "(euclidean, angular, ip or dot) when it has one, else l2")
        ("validate-every", whole_number(&a.config.validate_every, 0)
                               ->default_value(c.validate_every, show(c.validate_every))->value_name("K"),
         "also check the energy against the CPU's double-precision recomputation after every K-th assign "
         "(every run is checked once at its end); 0: only at the end")
        ("storage", po::value(&a.storage)->default_value(storage_name(c.storage))->value_name("TYPE"),
         "precision the points are held in during the fit: f32, f16 or bf16 (half the GPU memory and bandwidth "
         "for the points); both backends round the points the same way first, and the energy is that of the "
         "rounded points")
        ("assign-precision", po::value(&a.precision)->default_value(precision_name(c.assign_precision))
                                 ->value_name("P"),
         "exact: every vector goes to the anchor its double-precision distances pick; fast: the fast distances "
         "decide alone (GPU: one half-precision tensor-core product; CPU: float32), so vectors nearly "
         "equidistant from two anchors may take the farther one")
        ("threads", whole_number(&a.config.threads, 0)->default_value(c.threads, show(c.threads))->value_name("N"),
         "CPU threads (OpenMP and BLAS); 0 uses every core; at most the cores, and as many as the address-space "
         "limit (ulimit -v) leaves room for, with a note when fewer than asked; the result does not depend on it")
        ("gpu", whole_number(&a.gpu, 0)->default_value(0)->value_name("N"), "index of the CUDA device to use (compress under mpirun, when not given: the process's local rank, modulo the "
         "GPUs present)")
        ("kernel", po::value(&a.kernel)->default_value("auto")->value_name("FAMILY"),
         "the GPU's kernels: auto (the fastest the GPU has: hopper on sm_90, portable on other GPUs since "
         "Ampere), hopper (wgmma, sm_90 only), portable (mma.sync tensor cores, sm_80 on) or cuda-cores "
         "(float32 FMAs); every one gives the same result; auto defers to the VLATTICE_KERNEL variable "
         "when it is set")
        ("gpu-memory", po::value(&a.gpu_memory)->default_value("auto")->value_name("SIZE"),
         "GPU memory the run's buffers may take, as 8GiB: points whose rows do not fit beside the anchors and "
         "each point's state (28 bytes a point) are made a tile per pass, from their rows in the stored type "
         "kept on the GPU where those fit with room to spare (uint8: half of the 16-bit rows), else streamed from "
         "host memory, with the same result as when they are held, and only where holding them would leave "
         "less than an eighth of the memory; auto: the GPU's free memory")
        ("dataset", po::value(&a.dataset)->default_value(dataset)->value_name("NAME"),
         "dataset to read from an HDF5 INPUT");
    add_memory_option(options, a);
}

void add_memory_option(po::options_description& options, AnnealArgs& a) {
    options.add_options()
        ("memory", po::value(&a.memory)->default_value("auto")->value_name("SIZE"),
         "host memory INPUT's points may take, as 256MiB or 8GiB: a .npy, big-ann or TEXMEX file or a "
         "contiguous HDF5 dataset of float32, float16, uint8 or int8 values whose points take more (in their "
         "stored type) stays in the file, read from it on every pass through a memory mapping of which at most "
         "SIZE stays resident, with the same result; other inputs larger than SIZE are refused. Per-row state "
         "(assignments, distances, codes) comes on top. auto: half of the memory the process may have (the "
         "machine's, its control group's or ulimit -v), other inputs read whole");
}

void check_train_sample(std::size_t sample, std::size_t anchors) {
    if (anchors > sample) {
        throw Error("--train-sample " + std::to_string(sample) + " draws fewer rows than the " +
                    std::to_string(anchors) + " anchors to fit (-m)");
    }
}

void check_memory_arg(AnnealArgs& a) {
    a.memory_bytes = a.memory == "auto" ? 0 : parse_byte_size_option(a.memory, "--memory");
}

std::size_t coding_tile_rows(const AnnealArgs& a, std::size_t d) {
    if (a.memory_bytes == 0) {
        return 0;
    }
    const std::uint64_t within = a.memory_bytes / 4 / (std::max<std::size_t>(d, 1) * sizeof(float));
    return static_cast<std::size_t>(std::clamp<std::uint64_t>(within, 1, pass_tile_rows(d)));
}

void add_input_format_option(po::options_description& options, AnnealArgs& a) {
    options.add_options()
        ("input-format", po::value(&a.input_format)->value_name("FORMAT"),
         "the format of INPUT by name, in place of its extension: fvecs bvecs ivecs fbin u8bin npy h5 hdf5; "
         "needed for - (standard input)");
}

std::string input_file(const std::string& input, const AnnealArgs& args) {
    if (!args.input_format.empty()) {
        parse_option_value([&] { check_input_format(args.input_format); });
    }
    if (input != "-") {
        return input;
    }
    if (args.input_format.empty()) {
        throw UsageError("INPUT -: standard input has no extension to tell its format by; name it with "
                         "--input-format (fvecs bvecs ivecs fbin u8bin npy h5 hdf5)");
    }
    return standard_input_file(args.input_format);
}

namespace {

// --metric as given, or nothing for `auto`; throws UsageError for a name that is no metric.
std::optional<Metric> given_metric(const AnnealArgs& args) {
    if (args.metric == "auto") {
        return std::nullopt;
    }
    return parse_option_value([&] { return parse_metric(args.metric); });
}

}  // namespace

void check_anneal_args(AnnealArgs& a) {
    a.config.anchors = static_cast<std::size_t>(a.anchors);
    a.config.init_sample = static_cast<std::size_t>(a.init_sample);
    a.config.seed = parse_unsigned_option(a.seed, "--seed");
    a.config.storage = parse_option_value([&] { return parse_storage(a.storage); });
    a.config.assign_precision = parse_option_value([&] { return parse_precision(a.precision); });
    a.kernels = parse_option_value([&] { return parse_gpu_kernels(a.kernel); });
    check_memory_arg(a);
    a.gpu_memory_bytes = a.gpu_memory == "auto" ? 0 : parse_byte_size_option(a.gpu_memory, "--gpu-memory");
    // Only the name here: `auto` waits for the input, which metric_of reads.
    given_metric(a);
}

Metric metric_of(const AnnealArgs& args, const std::string& input) {
    if (const std::optional<Metric> given = given_metric(args)) {
        return *given;
    }
    return input_metric(input, args.input_format).value_or(Metric::l2);
}

void warn_zero_rows(const std::string& command, std::size_t zero_rows, bool quiet) {
    if (zero_rows > 0 && !quiet) {
        print_notice(command, "warning",
                     std::to_string(zero_rows) + " vectors are all zero; with --metric angular they have no "
                     "direction and stay zero");
    }
}

LoadedSet load_input(const std::string& command, const std::string& path, const AnnealArgs& args, Metric metric,
                     bool quiet) {
    ReadOptions options;
    options.dataset = args.dataset;
    options.format = args.input_format;
    options.memory_given = args.memory_bytes > 0;
    options.memory = options.memory_given ? args.memory_bytes : memory_limit().bytes / 2;
    PassLine line(!quiet && ::isatty(STDERR_FILENO), "reading " + path);
    options.progress = [&](const ReadStatus& status) { line.bytes(status); };
    LoadedSet loaded = during("reading INPUT " + path, [&] { return load_stored_points(path, options, metric); });
    line.finish();
    if (loaded.points.view().mapped() && !quiet) {
        print_notice(command, "note",
                     "INPUT's points take " + byte_size_text(loaded.points.bytes()) + ", more than --memory's " +
                         byte_size_text(options.memory) + ": they stay in " + path +
                         ", read from it on every pass with at most that much of them resident");
    }
    warn_zero_rows(command, loaded.zero_rows, quiet);
    return loaded;
}

}  // namespace vlattice::cli
