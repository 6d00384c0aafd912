#include "anneal_options.hpp"

#include "vlattice/io.hpp"

#include <cmath>
#include <optional>

namespace vlattice::cli {

void add_anneal_options(po::options_description& options, AnnealArgs& a) {
    const AnnealConfig c;
    const long long anchors = static_cast<long long>(c.anchors);
    const std::string dataset = ReadOptions{}.dataset;
    const std::string min_gain = "once cold (T = 0), stop when the energy gains less than G of itself per iteration for " +
                                 std::to_string(c.patience) + " iterations in a row (while hot, go cold instead); "
                                 "0: run until the assignments stop changing, or --iters";
    options.add_options()
        ("anchors,m", po::value(&a.anchors)->default_value(anchors, show(anchors))->value_name("M"),
         "anchors to learn, 1 <= M <= number of vectors; anchors left empty are dropped, so a run may end with fewer")
        ("iters", po::value(&a.config.max_iters)->default_value(c.max_iters, show(c.max_iters))->value_name("N"),
         "maximum iterations; the run stops earlier when converged")
        ("min-gain", po::value(&a.config.min_gain)->default_value(c.min_gain, show(c.min_gain))->value_name("G"),
         min_gain.c_str())
        ("t0", po::value(&a.config.t0)->default_value(c.t0, show(c.t0))->value_name("T"),
         "initial temperature, >= 0; hot iterations trim more outliers and move anchors part of the way, "
         "0 runs cold (plain Lloyd steps with --trim-final) from the start")
        ("cooling", po::value(&a.config.cooling)->default_value(c.cooling, show(c.cooling))->value_name("C"),
         "T <- T * (1 - C) after every iteration, C in [0, 1)")
        ("trim", po::value(&a.config.trim)->default_value(c.trim, show(c.trim))->value_name("F"),
         "share of each anchor's farthest members left out of its mean at T = T0, in [0, 1)")
        ("trim-final", po::value(&a.config.trim_final)->default_value(c.trim_final, show(c.trim_final))->value_name("F"),
         "share left out at T = 0, in [0, 1); 0 ends at a k-means fixed point, = --trim gives trimmed k-means")
        ("maintenance-every", po::value(&a.config.maintenance_every)
                                  ->default_value(c.maintenance_every, show(c.maintenance_every))->value_name("P"),
         "merge close anchors, split crowded ones and re-seed empty ones every P iterations while hot; 0 turns it off")
        ("init-sample", po::value(&a.init_sample)->default_value(0)->value_name("S"),
         "k-means++ picks the first anchors from a random sample of S points; 0: min(n, 8 * M)")
        ("seed", po::value(&a.seed)->default_value(show(c.seed))->value_name("S"),
         "seeds every random choice; the same input, seed and backend give the same result on any machine "
         "(compress: a byte-identical file)")
        ("metric", po::value(&a.metric)->default_value("auto")->value_name("NAME"),
         "l2, or angular (every vector scaled to unit length on load); auto: an HDF5 input's 'distance' "
         "attribute (euclidean or angular) when it has one, else l2")
        ("validate-every", po::value(&a.config.validate_every)
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
        ("threads", po::value(&a.config.threads)->default_value(c.threads, show(c.threads))->value_name("N"),
         "CPU threads (OpenMP and BLAS); 0 uses every core; the result does not depend on it")
        ("gpu", po::value(&a.gpu)->default_value(0)->value_name("N"), "index of the CUDA device to use")
        ("dataset", po::value(&a.dataset)->default_value(dataset)->value_name("NAME"),
         "dataset to read from an HDF5 INPUT");
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
    const AnnealConfig& c = a.config;
    require_option(a.anchors >= 1, "-m/--anchors", "at least 1", a.anchors);
    require_option(c.max_iters >= 1, "--iters", "at least 1", c.max_iters);
    require_option(c.t0 >= 0.0 && std::isfinite(c.t0), "--t0", "a finite number >= 0", c.t0);
    require_option(c.min_gain >= 0.0 && std::isfinite(c.min_gain), "--min-gain", "a finite number >= 0", c.min_gain);
    require_option(c.cooling >= 0.0 && c.cooling < 1.0, "--cooling", "in [0, 1)", c.cooling);
    require_option(c.trim >= 0.0 && c.trim < 1.0, "--trim", "in [0, 1)", c.trim);
    require_option(c.trim_final >= 0.0 && c.trim_final < 1.0, "--trim-final", "in [0, 1)", c.trim_final);
    require_option(c.maintenance_every >= 0, "--maintenance-every", ">= 0", c.maintenance_every);
    require_option(c.validate_every >= 0, "--validate-every", ">= 0", c.validate_every);
    require_option(c.threads >= 0, "--threads", ">= 0", c.threads);
    require_option(a.gpu >= 0, "--gpu", ">= 0", a.gpu);
    require_option(a.init_sample >= 0, "--init-sample", ">= 0", a.init_sample);
    a.config.anchors = static_cast<std::size_t>(a.anchors);
    a.config.init_sample = static_cast<std::size_t>(a.init_sample);
    a.config.seed = parse_unsigned_option(a.seed, "--seed");
    a.config.storage = parse_option_value([&] { return parse_storage(a.storage); });
    a.config.assign_precision = parse_option_value([&] { return parse_precision(a.precision); });
    // Only the name here: `auto` waits for the input, which metric_of reads.
    given_metric(a);
}

Metric metric_of(const AnnealArgs& args, const std::string& input) {
    if (const std::optional<Metric> given = given_metric(args)) {
        return *given;
    }
    return input_metric(input).value_or(Metric::l2);
}

LoadedPoints load_input(const std::string& command, const std::string& path, const AnnealArgs& args, Metric metric,
                        bool quiet) {
    ReadOptions options;
    options.dataset = args.dataset;
    LoadedPoints loaded = load_points(path, options, metric);
    if (loaded.zero_rows > 0 && !quiet) {
        print_notice(command, "warning",
                     std::to_string(loaded.zero_rows) + " vectors are all zero; with --metric angular they have no "
                     "direction and stay zero");
    }
    return loaded;
}

}  // namespace vlattice::cli
