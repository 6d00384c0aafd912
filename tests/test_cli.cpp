// End to end: the built `vlattice` binary run as a user would, on files written here.
#include "support.hpp"

#include "vlattice/format.hpp"

#include "vlattice/config.hpp"
#include "vlattice/io.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include <cctype>
#include <filesystem>
#include <limits>
#include <sstream>

using namespace vlattice;
using namespace vlattice::test;
using Catch::Contains;

namespace {

constexpr std::size_t kN = 2000;
constexpr std::size_t kD = 16;
const std::string kPrecious = "an existing file that a failed run must not touch\n";

// .fvecs written byte by byte, so the test does not depend on the writer it checks against.
std::string fvecs_bytes(const Matrix& points) {
    std::string bytes;
    const auto dim = static_cast<std::int32_t>(points.cols);
    for (std::size_t i = 0; i < points.rows; ++i) {
        bytes.append(reinterpret_cast<const char*>(&dim), sizeof dim);
        bytes.append(reinterpret_cast<const char*>(points.row(i)), points.cols * sizeof(float));
    }
    return bytes;
}

Matrix sample_points(std::uint64_t run_seed, std::size_t n = kN, std::size_t d = kD) {
    std::mt19937_64 rng(run_seed);
    return random_points(n, d, rng);
}

struct Sample {
    ScratchDir dir;
    std::string input = dir.path("points.fvecs");
    explicit Sample(std::uint64_t run_seed) { write_file(input, fvecs_bytes(sample_points(run_seed))); }
};

CommandResult compress(const std::string& input, const std::string& output, const std::string& extra = "",
                       int threads = 2) {
    // The CPU, so that the report's backend and the timings are the same on machines with a GPU.
    return run_cli("compress " + quote(input) + " -o " + quote(output) + " -m 16 --iters 10 --quiet --device cpu --threads " +
                   std::to_string(threads) + " " + extra);
}

// Help text wrapped at any column reads the same once every run of white space is one space.
std::string one_line(const std::string& text) {
    std::string out;
    for (const char c : text) {
        const bool space = std::isspace(static_cast<unsigned char>(c)) != 0;
        if (!space || (!out.empty() && out.back() != ' ')) {
            out += space ? ' ' : c;
        }
    }
    return out;
}

nlohmann::json info_json(const std::string& vlat) {
    const CommandResult info = run_cli("info --json " + quote(vlat));
    INFO(info.output);
    REQUIRE(info.exit_code == 0);
    return nlohmann::json::parse(info.output);
}

double printed_mse(const std::string& output) {
    const std::string label = "reconstruction MSE: ";
    const std::size_t at = output.find(label);
    REQUIRE(at != std::string::npos);
    return std::stod(output.substr(at + label.size()));
}

bool relatively_close(double a, double b, double relative) {
    return std::abs(a - b) <= relative * std::max(std::abs(a), std::abs(b));
}

// A failed command must exit non-zero, say what went wrong, and leave `guarded` as it was.
void check_fails(const CommandResult& result, const std::string& guarded, const std::vector<std::string>& words) {
    INFO(result.output);
    CHECK(result.exit_code != 0);
    CHECK(result.exit_code < 128);
    CHECK_THAT(result.output, Contains("error: "));
    for (const std::string& word : words) {
        CHECK_THAT(result.output, Contains(word));
    }
    CHECK(read_file(guarded) == kPrecious);
}

}  // namespace

TEST_CASE("compress, info and decompress round-trip through the CLI", "[cli]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    Sample sample(run_seed);
    const std::string vlat = sample.dir.path("points.vlat");

    const CommandResult compressed = run_cli("compress " + quote(sample.input) + " -o " + quote(vlat) +
                                             " -m 16 --iters 10 --threads 2 --seed " + std::to_string(run_seed));
    INFO(compressed.output);
    REQUIRE(compressed.exit_code == 0);
    CHECK_THAT(compressed.output, Contains("2000 x 16") && Contains("bytes per vector") && Contains("energy"));
    // Not a terminal: no progress bar.
    CHECK_THAT(compressed.output, !Contains("\r"));

    const nlohmann::json info = info_json(vlat);
    CHECK(info["n"] == kN);
    CHECK(info["d"] == kD);
    CHECK(info["m"] >= 1);
    CHECK(info["m"] <= 16);
    CHECK(info["metric"] == "l2");
    CHECK(info["anchor_storage"] == "f32");
    // Empty anchors are dropped, so the final m, and with it the id width, may be below 16.
    const auto m = info["m"].get<std::uint64_t>();
    unsigned bits = 0;
    while ((std::uint64_t{1} << bits) < m) {
        ++bits;
    }
    CHECK(info["assignment_bits"] == bits);
    CHECK(info["code_bytes_per_vector"] == bits / 8.0);
    REQUIRE(info["sections"].size() >= 3);
    for (const nlohmann::json& section : info["sections"]) {
        CHECK(section["tag"].get<std::string>().size() == 4);
        CHECK(section["bytes"] > 0);
        CHECK(section["checksum"].get<std::string>().size() == 16);
    }
    CHECK(info["file_bytes"] == read_file(vlat).size());
    CHECK(info["metadata"]["config"]["seed"] == run_seed);
    const double energy = info["metadata"]["energy"].get<double>();
    CHECK(energy > 0.0);

    const CommandResult text = run_cli("info " + quote(vlat));
    INFO(text.output);
    CHECK(text.exit_code == 0);
    CHECK_THAT(text.output, Contains("ANCH") && Contains("ASGN") && Contains("META") && Contains("ratio to float32"));

    const Matrix original = read_vectors(sample.input);
    Matrix decoded;
    for (const char* extension : {".fvecs", ".npy"}) {
        const std::string out = sample.dir.path(std::string("decoded") + extension);
        const CommandResult decompressed =
            run_cli("decompress " + quote(vlat) + " -o " + quote(out) + " --reference " + quote(sample.input));
        INFO(decompressed.output);
        REQUIRE(decompressed.exit_code == 0);
        CHECK(relatively_close(printed_mse(decompressed.output), energy, 1e-5));
        const Matrix written = read_vectors(out);
        CHECK(written.rows == kN);
        CHECK(written.cols == kD);
        if (decoded.rows > 0) {
            CHECK(written.data == decoded.data);
        }
        decoded = written;
    }
    // numpy, as an outside reader, sees the same shape and type.
    run_python("import numpy as np\n"
               "x = np.load('" + sample.dir.path("decoded.npy") + "')\n"
               "assert x.shape == (2000, 16) and x.dtype == np.float32, (x.shape, x.dtype)\n");
}

TEST_CASE("the same seed gives a byte-identical file, whatever the thread count", "[cli]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    Sample sample(run_seed);
    const std::string seed_option = "--seed " + std::to_string(run_seed);
    const std::string a = sample.dir.path("a.vlat");
    const std::string b = sample.dir.path("b.vlat");
    const std::string c = sample.dir.path("c.vlat");
    REQUIRE(compress(sample.input, a, seed_option).exit_code == 0);
    REQUIRE(compress(sample.input, b, seed_option).exit_code == 0);
    REQUIRE(compress(sample.input, c, seed_option, 1).exit_code == 0);
    CHECK(read_file(a) == read_file(b));
    CHECK(read_file(a) == read_file(c));
}

TEST_CASE("an HDF5 input's 'distance' attribute sets the metric unless --metric says otherwise", "[cli]") {
    ScratchDir dir;
    const auto input_with = [&](const std::string& name, const std::string& distance) {
        const std::string path = dir.path(name);
        run_python("import h5py, numpy as np\n"
                   "with h5py.File(" + quote(path) + ", 'w') as f:\n"
                   "    f['train'] = np.random.default_rng(3).normal(size=(300, 8)).astype('<f4')\n"
                   "    f.attrs['distance'] = '" + distance + "'\n");
        return path;
    };
    const std::string angular = input_with("angular.hdf5", "angular");
    const std::string by_attribute = dir.path("auto.vlat");
    REQUIRE(compress(angular, by_attribute).exit_code == 0);
    CHECK(info_json(by_attribute)["metric"] == "angular");
    const std::string overridden = dir.path("l2.vlat");
    REQUIRE(compress(angular, overridden, "--metric l2").exit_code == 0);
    CHECK(info_json(overridden)["metric"] == "l2");

    const std::string jaccard = input_with("jaccard.hdf5", "jaccard");
    const std::string out = dir.path("never.vlat");
    const CommandResult refused = compress(jaccard, out);
    CHECK(refused.exit_code != 0);
    CHECK_THAT(refused.output, Contains(jaccard) && Contains("'distance' is 'jaccard'"));
    CHECK_FALSE(std::filesystem::exists(out));
    CHECK(compress(jaccard, out, "--metric l2").exit_code == 0);
}

TEST_CASE("compress --metric angular and --anchor-storage f16 reach the file", "[cli]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    Sample sample(run_seed);
    const std::string vlat = sample.dir.path("angular.vlat");
    REQUIRE(compress(sample.input, vlat, "--metric angular --anchor-storage f16").exit_code == 0);
    const nlohmann::json info = info_json(vlat);
    CHECK(info["metric"] == "angular");
    CHECK(info["anchor_storage"] == "f16");

    // The reference is normalised like the input was, so the error stays on the unit sphere.
    const CommandResult decompressed = run_cli("decompress " + quote(vlat) + " -o " +
                                               quote(sample.dir.path("out.npy")) + " --reference " + quote(sample.input));
    INFO(decompressed.output);
    REQUIRE(decompressed.exit_code == 0);
    const double mse = printed_mse(decompressed.output);
    CHECK(mse > 0.0);
    CHECK(mse < 4.0);
    CHECK(relatively_close(mse, info["metadata"]["energy"].get<double>(), 1e-2));
}

TEST_CASE("compress --storage and --assign-precision reach the run's metadata", "[cli]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    Sample sample(run_seed);
    const std::string plain = sample.dir.path("plain.vlat");
    const std::string stored = sample.dir.path("stored.vlat");
    REQUIRE(compress(sample.input, plain).exit_code == 0);
    REQUIRE(compress(sample.input, stored, "--storage bf16 --assign-precision fast").exit_code == 0);
    const nlohmann::json config = info_json(stored)["metadata"]["config"];
    CHECK(config["storage"] == "bf16");
    CHECK(config["assign_precision"] == "fast");
    CHECK(info_json(plain)["metadata"]["config"]["storage"] == "f32");
    // bfloat16 keeps 8 bits of each coordinate: the fit saw other points.
    CHECK(info_json(plain)["metadata"]["energy"] != info_json(stored)["metadata"]["energy"]);
}

TEST_CASE("compress --report writes the energy, every iteration and the phase seconds", "[cli]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    Sample sample(run_seed);
    const std::string report_path = sample.dir.path("report.json");
    REQUIRE(compress(sample.input, sample.dir.path("r.vlat"), "--validate-every 2 --report " + quote(report_path))
                .exit_code == 0);
    const nlohmann::json report = nlohmann::json::parse(read_file(report_path));
    CHECK(report["energy"].get<double>() > 0.0);
    CHECK(report["n"] == kN);
    CHECK(report["d"] == kD);
    CHECK(report["backend"] == "cpu");
    CHECK(report["threads"] == 2);
    REQUIRE(report["history"].is_array());
    CHECK(report["history"].size() == report["iterations"]);
    CHECK(report["history"].size() <= 10);
    CHECK(report["history"][0].contains("temperature"));
    double iteration_seconds = 0.0;
    for (const auto& record : report["history"]) {
        CHECK(record["seconds"].get<double>() > 0.0);
        iteration_seconds += record["seconds"].get<double>();
    }
    CHECK(iteration_seconds <= report["seconds"]["total"].get<double>());
    CHECK(report["validation"]["checks"] == report["iterations"].get<int>() / 2 + 1);
    CHECK(report["validation"]["relative_difference"].get<double>() <= 1e-5);
    CHECK(report["validation"]["cpu_recomputed_energy"] == report["energy"]);
    for (const char* phase : {"load", "init", "init_upload", "assign", "reduce", "update", "maintenance",
                              "maintenance_nearest", "maintenance_members", "energy", "validation", "write", "fit",
                              "total"}) {
        INFO(phase);
        CHECK(report["seconds"][phase].get<double>() >= 0.0);
    }
    CHECK(report["seconds"]["maintenance_nearest"].get<double>() + report["seconds"]["maintenance_members"].get<double>() <=
          report["seconds"]["maintenance"].get<double>());
    CHECK(report["seconds"]["init_upload"].get<double>() <= report["seconds"]["init"].get<double>());
}

TEST_CASE("every command's --help lists its options and their defaults", "[cli]") {
    const AnnealConfig defaults;
    const auto text = [](double value) {
        std::ostringstream out;
        out << value;
        return out.str();
    };

    const CommandResult help = run_cli("compress --help");
    INFO(help.output);
    CHECK(help.exit_code == 0);
    for (const std::string option :
         {"--output", "--anchors", "--iters", "--min-gain", "--t0", "--cooling", "--trim", "--trim-final", "--maintenance-every",
          "--init-sample", "--seed", "--metric", "--storage", "--assign-precision", "--threads", "--device", "--gpu",
          "--kernel", "--dataset", "--anchor-storage", "--report",
          "--bits", "--target-bytes", "--target-ratio", "--quiet", "--help"}) {
        CHECK_THAT(help.output, Contains(option + " "));
    }
    for (const std::string& value :
         {std::to_string(defaults.anchors), std::to_string(defaults.max_iters), text(defaults.min_gain), text(defaults.t0), text(defaults.cooling),
          text(defaults.trim), text(defaults.trim_final), std::to_string(defaults.maintenance_every),
          std::to_string(defaults.seed), std::to_string(defaults.threads), std::string("auto"),
          std::string("train"), std::string("f32"), std::string("exact")}) {
        CHECK_THAT(help.output, Contains("(=" + value + ")"));
    }
    CHECK_THAT(one_line(help.output), Contains("maximum iterations; the run stops earlier when converged"));
    CHECK(run_cli("help compress").output == help.output);

    const CommandResult decompress = run_cli("decompress --help");
    INFO(decompress.output);
    CHECK(decompress.exit_code == 0);
    for (const char* option : {"--output", "--reference", "--dataset", "--quiet", "--help"}) {
        CHECK_THAT(decompress.output, Contains(option));
    }
    CHECK_THAT(decompress.output, Contains("(=train)"));

    const CommandResult query = run_cli("query --help");
    INFO(query.output);
    CHECK(query.exit_code == 0);
    for (const char* option : {"--queries", "--dataset", "--k", "--nprobe", "--ground-truth", "--limit", "--output",
                               "--device", "--gpu", "--threads", "--json", "--help"}) {
        CHECK_THAT(query.output, Contains(option));
    }
    CHECK_THAT(query.output, Contains("(=test)") && Contains("(=10)") && Contains("(=16)"));

    const CommandResult info = run_cli("info -h");
    INFO(info.output);
    CHECK(info.exit_code == 0);
    CHECK_THAT(info.output, Contains("--json") && Contains("--help"));
}

TEST_CASE("the CLI runs OpenBLAS's kernels for the CPU unless OPENBLAS_CORETYPE names others", "[cli]") {
    // This test's own process restarted with the variable set; the CLI is started without it.
    const CommandResult chosen = run_command("env -u OPENBLAS_CORETYPE " + cli_command() + " --version");
    INFO(chosen.output);
    CHECK(chosen.exit_code == 0);
    CHECK_THAT(chosen.output, Contains("OpenBLAS kernels: "));
    __builtin_cpu_init();
    if (__builtin_cpu_is("intel") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        CHECK_THAT(chosen.output, !Contains("OpenBLAS kernels: Prescott"));
    }
    const CommandResult forced = run_command("OPENBLAS_CORETYPE=Prescott " + cli_command() + " --version");
    INFO(forced.output);
    CHECK(forced.exit_code == 0);
    CHECK_THAT(forced.output, Contains("OpenBLAS kernels: Prescott"));
}

TEST_CASE("the top level dispatches, prints its version and rejects unknown commands", "[cli]") {
    const CommandResult version = run_cli("--version");
    CHECK(version.exit_code == 0);
    CHECK_THAT(version.output, Contains(VLATTICE_VERSION) && Contains("GPU 0: "));

    const CommandResult help = run_cli("--help");
    CHECK(help.exit_code == 0);
    CHECK_THAT(help.output, Contains("compress") && Contains("decompress") && Contains("info"));

    const CommandResult unknown = run_cli("squash x");
    INFO(unknown.output);
    CHECK(unknown.exit_code == 2);
    CHECK_THAT(unknown.output, Contains("unknown command 'squash'") && Contains("compress") && Contains("info"));

    CHECK(run_cli("").exit_code == 2);
}

TEST_CASE("compress rejects bad input and bad options, leaving the output untouched", "[cli]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    ScratchDir dir;
    const std::string out = dir.path("existing.vlat");
    write_file(out, kPrecious);
    const Matrix points = sample_points(run_seed, 300, 8);
    const std::string good = dir.path("good.fvecs");
    write_file(good, fvecs_bytes(points));

    SECTION("missing input file") {
        check_fails(compress(dir.path("absent.fvecs"), out), out, {"absent.fvecs"});
    }
    SECTION("empty input file") {
        write_file(dir.path("empty.fvecs"), "");
        check_fails(compress(dir.path("empty.fvecs"), out), out, {"empty.fvecs", "empty"});
    }
    SECTION("truncated input file") {
        const std::string bytes = fvecs_bytes(points);
        write_file(dir.path("cut.fvecs"), bytes.substr(0, bytes.size() - 5));
        check_fails(compress(dir.path("cut.fvecs"), out), out, {"cut.fvecs", "truncated"});
    }
    SECTION("dimension mismatch") {
        std::string bytes = fvecs_bytes(points);
        const Matrix wider = sample_points(run_seed, 1, 9);
        bytes += fvecs_bytes(wider);
        write_file(dir.path("mixed.fvecs"), bytes);
        check_fails(compress(dir.path("mixed.fvecs"), out), out, {"mixed.fvecs", "dimension"});
    }
    SECTION("NaN in a vector") {
        Matrix bad = points;
        bad.row(123)[4] = std::numeric_limits<float>::quiet_NaN();
        write_file(dir.path("nan.fvecs"), fvecs_bytes(bad));
        check_fails(compress(dir.path("nan.fvecs"), out), out, {"row 123", "NaN"});
    }
    SECTION("-m 0") {
        const CommandResult result = run_cli("compress " + quote(good) + " -o " + quote(out) + " -m 0");
        check_fails(result, out, {"--anchors must be a whole number in [1, 2^63), got '0'"});
        CHECK(result.exit_code == 2);
    }
    SECTION("-m larger than n") {
        check_fails(run_cli("compress " + quote(good) + " -o " + quote(out) + " -m 301"), out, {"301", "300"});
    }
    SECTION("unknown option") {
        const CommandResult result = compress(good, out, "--bogus 3");
        check_fails(result, out, {"--bogus", "vlattice compress --help"});
        CHECK(result.exit_code == 2);
    }
    SECTION("value out of range") {
        const CommandResult result = compress(good, out, "--trim 1.5");
        check_fails(result, out, {"--trim must be a number in [0, 1), got '1.5'"});
        CHECK(result.exit_code == 2);
        check_fails(compress(good, out, "--validate-every -1"), out,
                    {"--validate-every must be a whole number in [0, 2^31)"});
        check_fails(compress(good, out, "--init-sample -5"), out,
                    {"--init-sample must be a whole number in [0, 2^63), got '-5'"});
        // A seed takes all of [0, 2^64): Boost's own reading took -1 as 2^64 - 1.
        for (const char* seed : {"-1", "18446744073709551616", "1.5", "one"}) {
            const CommandResult bad_seed = compress(good, out, std::string("--seed ") + seed);
            check_fails(bad_seed, out, {"--seed must be a whole number in [0, 2^64), got '" + std::string(seed) + "'"});
            CHECK(bad_seed.exit_code == 2);
        }
    }
    SECTION("value of the wrong type") {
        const CommandResult result = compress(good, out, "--t0 hot");
        check_fails(result, out, {"hot", "--t0"});
        CHECK(result.exit_code == 2);
    }
    SECTION("unknown metric") {
        const CommandResult result = compress(good, out, "--metric manhattan");
        check_fails(result, out, {"manhattan"});
        CHECK(result.exit_code == 2);
    }
    SECTION("unknown storage, assign precision or kernel family") {
        const CommandResult storage = compress(good, out, "--storage fp16");
        check_fails(storage, out, {"--storage", "'fp16'", "f32, f16 or bf16"});
        CHECK(storage.exit_code == 2);
        const CommandResult precision = compress(good, out, "--assign-precision approximate");
        check_fails(precision, out, {"--assign-precision", "'approximate'"});
        CHECK(precision.exit_code == 2);
        const CommandResult kernel = compress(good, out, "--kernel tensor");
        check_fails(kernel, out, {"--kernel", "'tensor'", "auto, hopper, portable or cuda-cores"});
        CHECK(kernel.exit_code == 2);
    }
    SECTION("missing -o") {
        const CommandResult result = run_cli("compress " + quote(good));
        INFO(result.output);
        CHECK(result.exit_code == 2);
        CHECK_THAT(result.output, Contains("--output"));
    }
    SECTION("missing INPUT") {
        const CommandResult result = run_cli("compress -o " + quote(out));
        check_fails(result, out, {"INPUT"});
        CHECK(result.exit_code == 2);
    }
    SECTION("unwritable report") {
        check_fails(compress(good, out, "--report " + quote(dir.path("no/such/dir/r.json"))), out, {"r.json"});
    }
}

TEST_CASE("compress --device cuda without a usable GPU says why", "[cli]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    ScratchDir dir;
    const std::string input = dir.path("p.fvecs");
    write_file(input, fvecs_bytes(sample_points(run_seed, 200, 4)));
    const std::string out = dir.path("p.vlat");
    write_file(out, kPrecious);

    const CommandResult automatic = run_cli("compress " + quote(input) + " -o " + quote(dir.path("auto.vlat")) +
                                            " -m 4 --iters 3 --threads 2 --device auto");
    INFO(automatic.output);
    REQUIRE(automatic.exit_code == 0);
    if (automatic.output.find("running on the CPU") == std::string::npos) {
        WARN("a GPU is usable here; the no-GPU case of --device cuda is not exercised");
        return;
    }
    check_fails(run_cli("compress " + quote(input) + " -o " + quote(out) + " -m 4 --iters 3 --device cuda"), out,
                {"--device cuda", "GPU"});
}

TEST_CASE("info and decompress reject a damaged .vlat, leaving the output untouched", "[cli]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    Sample sample(run_seed);
    const std::string vlat = sample.dir.path("good.vlat");
    REQUIRE(compress(sample.input, vlat).exit_code == 0);
    std::string bytes = read_file(vlat);
    const std::string damaged = sample.dir.path("damaged.vlat");
    const std::string out = sample.dir.path("existing.fvecs");
    write_file(out, kPrecious);

    std::vector<std::string> words;
    SECTION("wrong magic") {
        bytes.replace(0, 4, "NOPE");
        words = {"damaged.vlat", "magic"};
    }
    SECTION("a flipped byte") {
        // Inside the anchors' payload: after the 44-byte header and the section's 12-byte head.
        bytes[60] = static_cast<char>(bytes[60] ^ 0x10);
        words = {"damaged.vlat", "checksum"};
    }
    SECTION("an unknown version") {
        // The version is the little-endian uint32 after the 8-byte magic.
        bytes[8] = 99;
        words = {"damaged.vlat", "version 99"};
    }
    SECTION("truncated") {
        bytes.resize(bytes.size() / 2);
        words = {"damaged.vlat", "truncated"};
    }
    write_file(damaged, bytes);

    const CommandResult info = run_cli("info " + quote(damaged));
    check_fails(info, out, words);
    CHECK(info.exit_code == 1);
    const CommandResult decompressed =
        run_cli("decompress " + quote(damaged) + " -o " + quote(out) + " --reference " + quote(sample.input));
    check_fails(decompressed, out, words);
    CHECK(decompressed.exit_code == 1);
}

TEST_CASE("decompress with a reference of the wrong shape names both shapes, and a negative --gpu is refused", "[cli]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    Sample sample(run_seed);
    const std::string vlat = sample.dir.path("p.vlat");
    REQUIRE(compress(sample.input, vlat).exit_code == 0);
    const std::string other = sample.dir.path("other.fvecs");
    write_file(other, fvecs_bytes(sample_points(run_seed, 100, kD)));
    const std::string out = sample.dir.path("existing.npy");
    write_file(out, kPrecious);
    check_fails(run_cli("decompress " + quote(vlat) + " -o " + quote(out) + " --reference " + quote(other)), out,
                {"--reference " + other + " holds 100 x 16 vectors", "p.vlat stands for 2000 x 16"});
    // An output format it cannot write is refused before the input is read (here it does not exist).
    check_fails(run_cli("decompress " + quote(sample.dir.path("missing.vlat")) + " -o " +
                        quote(sample.dir.path("out.txt"))),
                out, {"out.txt: unsupported extension '.txt'; supported: .fvecs .fbin .npy .h5 .hdf5"});
    const CommandResult gpu = run_cli("decompress " + quote(vlat) + " -o " + quote(out) + " --gpu -1");
    check_fails(gpu, out, {"--gpu must be a whole number in [0, 2^31), got '-1'"});
    CHECK(gpu.exit_code == 2);
}

TEST_CASE("no command writes over a file it reads, or one output over another", "[cli]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    Sample sample(run_seed);
    const std::string original = read_file(sample.input);
    const std::string link = sample.dir.path("link.fvecs");
    const std::string hard = sample.dir.path("hard.fvecs");
    std::filesystem::create_symlink(sample.input, link);
    std::filesystem::create_hard_link(sample.input, hard);
    const auto refused = [&](const CommandResult& result, const std::vector<std::string>& words) {
        INFO(result.output);
        CHECK(result.exit_code == 2);
        for (const std::string& word : words) {
            CHECK_THAT(result.output, Contains(word));
        }
        CHECK(read_file(sample.input) == original);
    };
    const std::string replace = "writing it would replace the data being read";
    // The same path, a symbolic link, a hard link and a path through "..": each is the input.
    refused(compress(sample.input, sample.input), {"-o", "INPUT", replace});
    refused(compress(sample.input, link), {replace});
    refused(compress(sample.input, hard), {replace});
    const std::filesystem::path input(sample.input);
    refused(compress(sample.input, (input.parent_path() / ".." / input.parent_path().filename() / input.filename()).string()),
            {replace});
    const std::string vlat = sample.dir.path("p.vlat");
    refused(compress(sample.input, vlat, "--report " + quote(sample.input)), {"--report", replace});
    refused(compress(sample.input, vlat, "--report " + quote(vlat)), {"one would overwrite the other"});
    CHECK_FALSE(std::filesystem::exists(vlat));

    REQUIRE(compress(sample.input, vlat).exit_code == 0);
    const std::string written = read_file(vlat);
    refused(run_cli("decompress " + quote(vlat) + " -o " + quote(sample.input) + " --reference " + quote(sample.input)),
            {"--reference", replace});
    refused(run_cli("query " + quote(vlat) + " --queries " + quote(sample.input) + " -o " + quote(hard) + " --device cpu"),
            {"--queries", replace});
    const CommandResult over_vlat = run_cli("decompress " + quote(vlat) + " -o " + quote(vlat));
    INFO(over_vlat.output);
    CHECK(over_vlat.exit_code == 2);
    CHECK(read_file(vlat) == written);

    // A folder where a file is to go is named before any work.
    const std::string folder = sample.dir.path("folder.npy");
    std::filesystem::create_directory(folder);
    const CommandResult onto_folder = run_cli("decompress " + quote(vlat) + " -o " + quote(folder) + " --device cpu");
    INFO(onto_folder.output);
    CHECK(onto_folder.exit_code == 1);
    CHECK_THAT(onto_folder.output, Contains(folder + ": is a directory"));
    // Before any work: queries of the wrong dimension, found once they are read, are not reported.
    const std::string results_folder = sample.dir.path("folder.hdf5");
    std::filesystem::create_directory(results_folder);
    const std::string narrow = sample.dir.path("narrow.fvecs");
    write_file(narrow, fvecs_bytes(sample_points(run_seed, 10, kD / 2)));
    const CommandResult query_folder =
        run_cli("query " + quote(vlat) + " --queries " + quote(narrow) + " -o " + quote(results_folder) + " --device cpu");
    INFO(query_folder.output);
    CHECK(query_folder.exit_code == 1);
    CHECK_THAT(query_folder.output, Contains(results_folder + ": is a directory"));
    CHECK_THAT(query_folder.output, !Contains("dimensions"));
    const CommandResult empty = compress(sample.input, "");
    INFO(empty.output);
    CHECK(empty.exit_code == 1);
    CHECK_THAT(empty.output, Contains("the output path is empty"));
    // The rename into place would put a regular file where the pipe (or a device) was.
    const std::string pipe = sample.dir.path("pipe.npy");
    REQUIRE(::mkfifo(pipe.c_str(), 0600) == 0);
    const CommandResult onto_pipe = run_cli("decompress " + quote(vlat) + " -o " + quote(pipe) + " --device cpu");
    INFO(onto_pipe.output);
    CHECK(onto_pipe.exit_code == 1);
    CHECK_THAT(onto_pipe.output, Contains(pipe + ": is not a regular file"));
    CHECK(std::filesystem::is_fifo(pipe));
}

TEST_CASE("a run stopped by SIGTERM leaves no temporary files and ends as the signal says", "[cli]") {
    ScratchDir dir;
    const std::string input = dir.path("long.fvecs");
    write_file(input, fvecs_bytes(sample_points(seed(), 20000, 64)));
    // Without cooling the run stays hot and never converges: it is still running when stopped,
    // with the report's temporary file open since the start.
    const CommandResult stopped = run_command(
        "(" + cli_command() + " compress " + quote(input) + " -o " + quote(dir.path("out.vlat")) + " --report " +
        quote(dir.path("report.json")) + " -m 512 --iters 100000 --cooling 0 --device cpu --quiet & pid=$!; "
        "for i in $(seq 1 400); do ls -A " + quote(dir.dir()) + " | grep -q 'report.json.tmp' && echo seen && break; "
        "sleep 0.05; done; kill -TERM $pid; wait $pid; echo status:$?; ls -A " + quote(dir.dir()) + ")");
    INFO(stopped.output);
    REQUIRE_THAT(stopped.output, Contains("seen"));
    CHECK_THAT(stopped.output, Contains("status:143"));
    CHECK_THAT(stopped.output, !Contains(".tmp."));
    CHECK_FALSE(std::filesystem::exists(dir.path("out.vlat")));
    CHECK_FALSE(std::filesystem::exists(dir.path("report.json")));
}

TEST_CASE("an HDF5 output that a file size limit cuts short is an error, not a crash", "[cli]") {
    ScratchDir dir;
    const std::string input = dir.path("in.fvecs");
    write_file(input, fvecs_bytes(sample_points(seed(), 20000, kD)));
    REQUIRE(run_cli("compress " + quote(input) + " -o " + quote(dir.path("in.vlat")) + " -m 16 --iters 3 --device cpu "
                    "--quiet").exit_code == 0);
    const std::string output = dir.path("out.h5");
    write_file(output, kPrecious);
    // 1.3 MB of vectors past a limit of at most 200 kB; ignored, SIGXFSZ turns the write past it into
    // an error (EFBIG), after which libhdf5's own cleanup at exit used to crash.
    const CommandResult cut = run_command("trap '' XFSZ; ulimit -f 200; " + cli_command() + " decompress " +
                                          quote(dir.path("in.vlat")) + " -o " + quote(output) + " --device cpu");
    INFO(cut.output);
    CHECK(cut.exit_code == 1);
    CHECK_THAT(cut.output, Contains(output) && Contains("cannot write the HDF5 file"));
    CHECK(read_file(output) == kPrecious);
    for (const auto& entry : std::filesystem::directory_iterator(dir.dir())) {
        CHECK_THAT(entry.path().filename().string(), !Contains(".tmp."));
    }
}

TEST_CASE("info shows a file whose metadata is empty", "[cli]") {
    ScratchDir dir;
    VlatFile file;
    file.n = 3;
    file.d = 2;
    file.anchors = Matrix(1, 2);
    file.assignments = {0, 0, 0};
    file.metadata_json = "{}";
    const std::string path = dir.path("empty-meta.vlat");
    write_vlat(path, file);
    const CommandResult text = run_cli("info " + quote(path));
    INFO(text.output);
    CHECK(text.exit_code == 0);
    CHECK_THAT(text.output, Catch::Contains("run metadata"));
    const CommandResult json = run_cli("info --json " + quote(path));
    CHECK(json.exit_code == 0);
    CHECK(nlohmann::json::parse(json.output)["metadata"] == nlohmann::json::object());
}

TEST_CASE("compress --device with an unknown kind is a usage error", "[cli]") {
    ScratchDir dir;
    const CommandResult result = run_cli("compress x.fvecs -o " + quote(dir.path("o.vlat")) + " --device tpu");
    CHECK(result.exit_code == 2);
    CHECK_THAT(result.output, Catch::Contains("--device") && Catch::Contains("tpu"));
}

TEST_CASE("compress says why the run stopped in its summary and its report and in the file", "[cli]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    ScratchDir dir;
    std::mt19937_64 rng(run_seed);
    // 100 anchors in one Gaussian: the assignments keep changing long after the gains stop paying.
    const std::string input = dir.path("blob.fvecs");
    write_file(input, fvecs_bytes(random_points(20000, 8, rng, 1)));
    const std::string vlat = dir.path("blob.vlat");
    const std::string report_path = dir.path("report.json");
    const std::string gained = "converged: the energy gained less than 0.002 of itself per iteration for 3 iterations";

    const CommandResult stopped = run_cli("compress " + quote(input) + " -o " + quote(vlat) +
                                          " -m 100 --device cpu --threads 2 --report " + quote(report_path));
    INFO(stopped.output);
    REQUIRE(stopped.exit_code == 0);
    const nlohmann::json report = nlohmann::json::parse(read_file(report_path));
    const int iterations = report["iterations"].get<int>();
    CHECK(iterations < AnnealConfig{}.max_iters);
    CHECK(report["converged"] == true);
    CHECK(report["config"]["min_gain"] == 0.002);
    const std::string reason = report["stop_reason"].get<std::string>();
    CHECK_THAT(reason, Catch::StartsWith(gained + " (the last "));
    CHECK_THAT(stopped.output, Contains("iterations  " + std::to_string(iterations) + " (" + reason + ")\n"));
    CHECK(info_json(vlat)["metadata"]["stop_reason"] == reason);

    const CommandResult cut = run_cli("compress " + quote(input) + " -o " + quote(vlat) +
                                      " -m 100 --device cpu --threads 2 --iters 12 --min-gain 0");
    INFO(cut.output);
    REQUIRE(cut.exit_code == 0);
    CHECK_THAT(cut.output, Contains("iterations  12 (reached the maximum of 12 iterations; the last gained "));

    for (const char* bad : {"-1", "nan", "inf"}) {
        const CommandResult refused = run_cli("compress " + quote(input) + " -o " + quote(vlat) + " --min-gain " + bad);
        INFO(refused.output);
        CHECK(refused.exit_code == 2);
        CHECK_THAT(refused.output, Contains("--min-gain must be a finite number >= 0, got "));
    }
}
