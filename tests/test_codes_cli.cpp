// Residual codes and search end to end: compress at a budget, decompress, query, as a user runs them.
#include "support.hpp"

#include "vlattice/device.hpp"
#include "vlattice/format.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <set>
#include <string>
#include <utility>

using namespace vlattice::test;
using Catch::Contains;

namespace {

const char* const kRun = " -m 64 --iters 12 --device cpu --threads 2 --quiet";

// 3000 x 24 train, 100 test queries and their exact 100 neighbours, written by h5py.
struct AnnFile {
    ScratchDir dir;
    std::string path = dir.path("mix.hdf5");
    AnnFile() {
        const CommandResult made = run_command(std::string("'") + VLATTICE_SOURCE_DIR + "/scripts/ann-hdf5' synthetic 3000 24 " +
                                               quote(path) + " --queries 100 --clusters 20 2>&1");
        INFO(made.output);
        REQUIRE(made.exit_code == 0);
    }
};

nlohmann::json info_of(const std::string& vlat) {
    const CommandResult info = run_cli("info --json " + quote(vlat));
    INFO(info.output);
    REQUIRE(info.exit_code == 0);
    return nlohmann::json::parse(info.output);
}

nlohmann::json query_json(const std::string& arguments) {
    const CommandResult found = run_cli("query " + arguments + " --device cpu --json");
    INFO(found.output);
    REQUIRE(found.exit_code == 0);
    return nlohmann::json::parse(found.output);
}

}  // namespace

// The scalar family on its own: test_model covers the choice between the families.
TEST_CASE("compress --codec scalar --target-bytes never overshoots and says what it chose", "[cli][codes]") {
    const AnnFile ann;
    for (const double budget : {0.4, 1.0, 2.5, 7.0, 13.3, 30.0, 200.0}) {
        INFO("budget " << budget);
        const std::string out = ann.dir.path("budget.vlat");
        const CommandResult run = run_cli("compress " + quote(ann.path) + " -o " + quote(out) +
                                          " -m 64 --iters 12 --device cpu --threads 2 --codec scalar --target-bytes " +
                                          std::to_string(budget));
        INFO(run.output);
        REQUIRE(run.exit_code == 0);
        CHECK_THAT(run.output, Contains("code bytes"));
        const nlohmann::json info = info_of(out);
        CHECK(info["code_bytes_per_vector"].get<double>() <= budget);
        if (budget < 1.0) {
            CHECK(info["m"] == 8);  // 3-bit ids: 0.375 bytes
            CHECK_THAT(run.output, Contains("holds the ids of 8 anchors, not 64"));
        }
        if (budget >= 25.0) {
            CHECK(info["residual_widths"] == "24 x 8 bits");
        }
        if (budget >= 2.0) {
            CHECK(info["version"] == 2);
            CHECK(info["codec"] == "scalar");
        }
    }
    // A ratio is of the float32 size, 4 d bytes: 12.5 % of 96 is 12.
    REQUIRE(run_cli("compress " + quote(ann.path) + " -o " + quote(ann.dir.path("ratio.vlat")) + kRun +
                    " --codec scalar --target-ratio 12.5%").exit_code == 0);
    REQUIRE(run_cli("compress " + quote(ann.path) + " -o " + quote(ann.dir.path("bytes.vlat")) + kRun +
                    " --codec scalar --target-bytes 12").exit_code == 0);
    CHECK(read_file(ann.dir.path("ratio.vlat")) == read_file(ann.dir.path("bytes.vlat")));
    CHECK(info_of(ann.dir.path("ratio.vlat"))["code_bytes_per_vector"].get<double>() <= 12.0);
}

// 3,000 vectors of 24 dimensions: 64 anchors take 6 KiB, the metadata's allowance 8 KiB, so a
// budget of 12 bytes per vector leaves about 7 for the ids and codes.
TEST_CASE("compress --target-file-bytes keeps the whole file within the budget and says what it tried",
          "[cli][codes]") {
    const AnnFile ann;
    const std::pair<std::string, double> budgets[] = {
        {"--target-file-bytes 12", 12.0}, {"--target-file-bytes 40", 40.0}, {"--target-file-ratio 25%", 24.0}};
    for (const auto& [budget, allowed] : budgets) {
        INFO(budget);
        const std::string out = ann.dir.path("file-budget.vlat");
        const std::string report_path = ann.dir.path("file-budget.json");
        const CommandResult run = run_cli("compress " + quote(ann.path) + " -o " + quote(out) +
                                          " -m 64 --iters 12 --device cpu --threads 2 --report " +
                                          quote(report_path) + " " + budget);
        INFO(run.output);
        REQUIRE(run.exit_code == 0);
        CHECK_THAT(run.output, Contains("tries 64, 16 and 4 anchors") && Contains("candidates  with m = 16 anchors") &&
                                   Contains("ids only") && Contains("file bytes") && Contains(", kept ("));
        CHECK(static_cast<double>(std::filesystem::file_size(out)) <= allowed * 3000.0);
        const nlohmann::json metadata = nlohmann::json::parse(vlattice::read_vlat(out).metadata_json);
        CHECK(metadata["residuals"]["target_file_bytes"] == allowed);
        CHECK(metadata["residuals"]["anchor_counts"].size() == 3);
        CHECK(metadata["m_requested"] == 64);  // -m, not the count kept
        // The report times every candidate of every count; a candidate's stages run one after another.
        const nlohmann::json report = nlohmann::json::parse(read_file(report_path));
        std::set<std::size_t> counts;
        for (const nlohmann::json& candidate : report["code_seconds"]["candidates"]) {
            INFO(candidate.dump());
            counts.insert(candidate["anchors"].get<std::size_t>());
            double stages = 0.0;
            for (const auto& [stage, seconds] : candidate["seconds"].items()) {
                stages += stage == "wall" ? 0.0 : seconds.get<double>();
            }
            CHECK(stages <= candidate["seconds"]["wall"].get<double>() + 1e-6);
        }
        CHECK(counts.size() == 3);
    }
    // Another file's anchors (as many as its budget kept) with their ids and the metadata allowance
    // take more than 4 bytes a vector.
    const std::size_t kept = vlattice::read_vlat(ann.dir.path("file-budget.vlat")).anchors.rows;
    const CommandResult reused = run_cli("compress " + quote(ann.path) + " -o " + quote(ann.dir.path("reused.vlat")) +
                                         kRun + " --target-file-bytes 4 --anchors-from " +
                                         quote(ann.dir.path("file-budget.vlat")));
    INFO(reused.output);
    CHECK(reused.exit_code == 1);
    CHECK_THAT(reused.output, Contains("the whole-file budget of 4 bytes per vector does not hold the file's " +
                                       std::to_string(kept) + " anchors"));
    const CommandResult tiny = run_cli("compress " + quote(ann.path) + " -o " + quote(ann.dir.path("tiny.vlat")) +
                                       kRun + " --target-file-bytes 2");
    INFO(tiny.output);
    CHECK(tiny.exit_code == 1);
    CHECK_THAT(tiny.output, Contains("does not hold even one anchor of 24 dimensions"));
    CHECK(!std::filesystem::exists(ann.dir.path("tiny.vlat")));
}

TEST_CASE("compress --bits codes every dimension, and decompress writes what they decode to", "[cli][codes]") {
    const AnnFile ann;
    double previous = 1e300;
    for (const int bits : {0, 2, 4, 8}) {
        INFO("bits " << bits);
        const std::string vlat = ann.dir.path("b" + std::to_string(bits) + ".vlat");
        REQUIRE(run_cli("compress " + quote(ann.path) + " -o " + quote(vlat) + kRun + " --bits " + std::to_string(bits)).exit_code == 0);
        const nlohmann::json info = info_of(vlat);
        CHECK(info["version"] == (bits == 0 ? 1 : 2));
        CHECK(info["residual_widths"] == (bits == 0 ? std::string("none") : "24 x " + std::to_string(bits) + " bits"));
        CHECK(info["code_bytes_per_vector"].get<double>() == Approx(0.75 + 24.0 * bits / 8.0));
        const CommandResult decoded = run_cli("decompress " + quote(vlat) + " -o " + quote(ann.dir.path("y.npy")) +
                                              " --device cpu --reference " + quote(ann.path));
        INFO(decoded.output);
        REQUIRE(decoded.exit_code == 0);
        const double mse = std::stod(decoded.output.substr(decoded.output.find("reconstruction MSE: ") + 20));
        CHECK(mse < previous);
        previous = mse;
    }
    CHECK(previous < 1e-3);
    // The HDF5 output holds the same floats as the .npy one, in dataset `train`.
    REQUIRE(run_cli("decompress " + quote(ann.dir.path("b8.vlat")) + " -o " + quote(ann.dir.path("y.hdf5")) +
                    " --device cpu --quiet").exit_code == 0);
    run_python("import h5py, numpy as np\n"
               "a = np.load(" + quote(ann.dir.path("y.npy")) + ")\n"
               "with h5py.File(" + quote(ann.dir.path("y.hdf5")) + ", 'r') as f:\n"
               "    b = f['train'][:]\n"
               "assert b.dtype == np.float32 and np.array_equal(a, b)\n");
}

TEST_CASE("compress rejects bad coding options", "[cli][codes]") {
    const AnnFile ann;
    const std::string out = ann.dir.path("never.vlat");
    const auto rejects = [&](const std::string& options, const std::string& message) {
        const CommandResult run = run_cli("compress " + quote(ann.path) + " -o " + quote(out) + kRun + " " + options);
        INFO(options << ": " << run.output);
        CHECK(run.exit_code == 2);
        CHECK_THAT(run.output, Contains(message));
    };
    rejects("--bits 3", "--bits must be 0, 2, 4 or 8, got 3");
    rejects("--bits -1", "--bits must be a whole number in [0, 8], got '-1'");  // not 4294967295
    rejects("--bits 4294967298", "--bits must be a whole number in [0, 8], got '4294967298'");  // not 2
    rejects("--bits 4 --target-bytes 10", "--bits fixes the widths");
    rejects("--bits 2 --target-ratio 10%", "--bits fixes the widths");
    rejects("--target-bytes 10 --target-ratio 0.1", "--target-bytes and --target-ratio each set a budget");
    rejects("--target-ratio 3% --target-file-bytes 40", "--target-ratio and --target-file-bytes each set a budget");
    rejects("--target-file-bytes 40 --target-file-ratio 5%", "each set a budget: give one");
    rejects("--bits 4 --target-file-bytes 40", "--bits fixes the widths, and a --target-file-bytes budget");
    rejects("--target-file-ratio 0", "--target-file-ratio must be a share of the float32 size");
    rejects("--target-file-bytes 0", "--target-file-bytes must be a finite number > 0, got '0'");
    rejects("--codec pq --subspaces 4 --target-file-bytes 40", "--subspaces fixes the product code without a budget");
    rejects("--codec pq --subspaces 4 --pq-bits 10", "--pq-bits must be 4, 8 or 12, got 10");
    rejects("--target-ratio 0", "--target-ratio must be a share of the float32 size");
    rejects("--target-ratio 150%", "got '150%'");
    rejects("--target-ratio abc", "got 'abc'");
    rejects("--target-bytes -3", "--target-bytes must be a finite number > 0, got '-3'");
    rejects("--codec rq", "--codec rq needs --stages S (at least 2)");
    rejects("--codec rq --stages 1", "--codec rq needs --stages S (at least 2)");
    rejects("--codec rq --bits 4 --stages 3", "--bits sets the scalar code's width; --codec rq takes --stages");
    rejects("--codec rq --stages 3 --target-bytes 8", "--stages fixes the code without a budget");
    rejects("--codec pq --stages 3 --target-bytes 8", "--stages fixes the code without a budget");
    rejects("--stages 3", "--stages fixes the code without a budget");
    rejects("--codec lsq", "unknown codec 'lsq' (expected auto, scalar, pq or rq)");
    // Checked before the input is read: a run does not load a large file only to refuse its options.
    const CommandResult early =
        run_cli("compress " + quote(ann.dir.path("missing.hdf5")) + " -o " + quote(out) + kRun + " --bits 3");
    INFO(early.output);
    CHECK(early.exit_code == 2);
    CHECK_THAT(early.output, Contains("--bits must be 0, 2, 4 or 8, got 3"));
}

TEST_CASE("query finds neighbours with and without codes and scores them against the ground truth", "[cli][codes]") {
    const AnnFile ann;
    const std::string coded = ann.dir.path("coded.vlat");
    const std::string plain = ann.dir.path("plain.vlat");
    REQUIRE(run_cli("compress " + quote(ann.path) + " -o " + quote(coded) + kRun + " --bits 8").exit_code == 0);
    REQUIRE(run_cli("compress " + quote(ann.path) + " -o " + quote(plain) + kRun).exit_code == 0);
    const std::string on = " --queries " + quote(ann.path) + " --ground-truth " + quote(ann.path + ":neighbors");

    const nlohmann::json exhaustive = query_json(quote(coded) + on + " --k 10 --nprobe all");
    CHECK(exhaustive["queries"] == 100);
    CHECK(exhaustive["nprobe"] == 64);
    CHECK(exhaustive["visited_per_query"].get<double>() == 3000.0);
    CHECK(exhaustive["recall"]["10-recall@10"].get<double>() >= 0.99);
    CHECK(exhaustive["recall"]["1-recall@1"].get<double>() >= 0.99);
    CHECK(exhaustive["ids"].size() == 100);
    CHECK(exhaustive["ids"][0].size() == 10);

    // A file of scalar codes is ranked by its reconstruction already: a re-rank changes nothing.
    const nlohmann::json reranked = query_json(quote(coded) + on + " --k 10 --nprobe all --rerank 50");
    CHECK(reranked["rerank"] == 50);
    CHECK(exhaustive["rerank"] == 0);
    CHECK(reranked["ids"] == exhaustive["ids"]);
    CHECK(reranked["distances"] == exhaustive["distances"]);

    const nlohmann::json anchors_only = query_json(quote(plain) + on + " --k 100 --nprobe all");
    CHECK(anchors_only["recall"]["10-recall@10"].get<double>() < exhaustive["recall"]["10-recall@10"].get<double>());
    CHECK(anchors_only["recall"].contains("100-recall@100"));

    const nlohmann::json probed = query_json(quote(coded) + on + " --k 10 --nprobe 4 --limit 20 -o " +
                                             quote(ann.dir.path("found.hdf5")));
    CHECK(probed["queries"] == 20);
    CHECK(probed["visited_per_query"].get<double>() < 3000.0);
    CHECK(probed["recall"]["10-recall@10"].get<double>() > 0.5);
    run_python("import h5py, json, numpy as np\n"
               "with h5py.File(" + quote(ann.dir.path("found.hdf5")) + ", 'r') as f:\n"
               "    ids, dist = f['neighbors'][:], f['distances'][:]\n"
               "want = json.loads(" + quote(probed["ids"].dump()) + ")\n"
               "assert ids.dtype == np.int64 and ids.shape == (20, 10), (ids.dtype, ids.shape)\n"
               "assert (ids == np.array(want)).all()\n"
               "assert (np.diff(dist, axis=1) >= 0).all()\n");

    const CommandResult text = run_cli("query " + quote(coded) + on + " --nprobe 8 --device cpu");
    INFO(text.output);
    CHECK(text.exit_code == 0);
    CHECK_THAT(text.output, Contains("10-recall@10") && Contains("queries per second") && Contains("query 0:"));
}

TEST_CASE("query rejects bad input, naming what is wrong", "[cli][codes]") {
    const AnnFile ann;
    const std::string vlat = ann.dir.path("q.vlat");
    REQUIRE(run_cli("compress " + quote(ann.path) + " -o " + quote(vlat) + kRun + " --bits 4").exit_code == 0);
    const auto fails = [&](const std::string& options, int code, const std::string& message) {
        const CommandResult run = run_cli("query " + quote(vlat) + " --device cpu " + options);
        INFO(options << ": " << run.output);
        CHECK(run.exit_code == code);
        CHECK_THAT(run.output, Contains(message));
    };
    const std::string queries = " --queries " + quote(ann.path);
    fails(queries + " --nprobe 0", 2, "--nprobe must be a whole number >= 1 or `all`, got '0'");
    fails(queries + " --nprobe many", 2, "--nprobe must be a whole number >= 1 or `all`, got 'many'");
    // Signs and spaces, which std::stoll let through, are refused like every other whole-number option.
    fails(queries + " --nprobe +3", 2, "got '+3'");
    fails(queries + " --nprobe ' 3'", 2, "got ' 3'");
    fails(queries + " --nprobe 99999999999999999999", 2, "got '99999999999999999999'");
    fails(queries + " --k 0", 2, "--k");
    // Negative whole numbers are refused, not wrapped to 2^64 - 1 (--k -1 tried to allocate that much).
    fails(queries + " --k -1", 2, "--k must be a whole number in [1, 2^63), got '-1'");
    fails(queries + " --limit -1", 2, "--limit must be a whole number in [0, 2^63), got '-1'");
    fails(queries + " --rerank -1", 2, "--rerank must be a whole number in [0, 2^63), got '-1'");
    fails(queries + " --threads -2", 2, "--threads must be a whole number in [0, 2^31), got '-2'");
    fails(queries + " --gpu -1", 2, "--gpu must be a whole number in [0, 2^31), got '-1'");
    fails(queries + " --dataset neighbors", 1, "the queries have 100 dimensions");
    fails(queries + " --ground-truth " + quote(ann.path + ":nothing"), 1, "nothing");
    fails(queries + " --ground-truth " + quote(ann.path + ":train"), 1, "not a vector id (a whole number >= 0)");
    fails(queries + " --dataset train --ground-truth " + quote(ann.path + ":neighbors"), 1,
          "100 rows of true neighbours for 3000 queries");
    fails(queries + " -o " + quote(ann.dir.path("found.npy")), 1, "written as HDF5");
    // Refused before the .vlat is read (here it does not exist).
    const CommandResult early = run_cli("query " + quote(ann.dir.path("missing.vlat")) + queries + " -o " +
                                        quote(ann.dir.path("found.npy")));
    INFO(early.output);
    CHECK(early.exit_code == 1);
    CHECK_THAT(early.output, Contains("found.npy: search results are written as HDF5"));
    fails("", 2, "--queries");
}

TEST_CASE("decompress and query --device cuda either use the GPU or say why they cannot", "[cli][codes]") {
    const AnnFile ann;
    const std::string vlat = ann.dir.path("d.vlat");
    REQUIRE(run_cli("compress " + quote(ann.path) + " -o " + quote(vlat) + kRun + " --bits 4").exit_code == 0);
    const vlattice::GpuStatus gpu = vlattice::gpu_status(0);
    const CommandResult decoded = run_cli("decompress " + quote(vlat) + " -o " + quote(ann.dir.path("y.npy")) + " --device cuda");
    const CommandResult found = run_cli("query " + quote(vlat) + " --queries " + quote(ann.path) + " --device cuda --json");
    INFO(decoded.output << found.output);
    if (gpu.usable) {
        CHECK(decoded.exit_code == 0);
        CHECK_THAT(decoded.output, Contains("decoded on the GPU"));
        CHECK(found.exit_code == 0);
        CHECK(nlohmann::json::parse(found.output)["device"] == "cuda");
    } else {
        for (const CommandResult* run : {&decoded, &found}) {
            CHECK(run->exit_code == 1);
            CHECK_THAT(run->output, Contains("--device cuda: no usable GPU") && Contains("use --device cpu"));
        }
        CHECK_FALSE(std::filesystem::exists(ann.dir.path("y.npy")));
    }
}

TEST_CASE("compress --metric ip keeps the vectors as given, and query ranks by the largest inner product",
          "[cli][codes][ip]") {
    ScratchDir dir;
    const std::string data = dir.path("ip.hdf5");
    const std::string tagged = dir.path("dot.hdf5");
    // Vectors of norms 0.5 to 20 and their exact 10 largest inner products (ties to the lower id),
    // with no `distance` attribute; a copy says `dot`.
    run_python("import h5py, numpy as np, shutil\n"
               "rng = np.random.default_rng(11)\n"
               "train = (rng.normal(size=(2000, 16)) * rng.uniform(0.5, 20.0, size=(2000, 1))).astype('<f4')\n"
               "test = rng.normal(size=(50, 16)).astype('<f4')\n"
               "dots = test.astype(np.float64) @ train.astype(np.float64).T\n"
               "neighbors = np.argsort(-dots, axis=1, kind='stable')[:, :10].astype('<i4')\n"
               "with h5py.File(" + quote(data) + ", 'w') as f:\n"
               "    f['train'], f['test'], f['neighbors'] = train, test, neighbors\n"
               "shutil.copy(" + quote(data) + ", " + quote(tagged) + ")\n"
               "with h5py.File(" + quote(tagged) + ", 'a') as f:\n"
               "    f.attrs['distance'] = 'dot'\n");
    const std::string ip = dir.path("ip.vlat");
    const std::string l2 = dir.path("l2.vlat");
    const std::string by_attribute = dir.path("dot.vlat");
    REQUIRE(run_cli("compress " + quote(data) + " -o " + quote(ip) + kRun + " --bits 8 --metric ip").exit_code == 0);
    REQUIRE(run_cli("compress " + quote(data) + " -o " + quote(l2) + kRun + " --bits 8").exit_code == 0);
    REQUIRE(run_cli("compress " + quote(tagged) + " -o " + quote(by_attribute) + kRun).exit_code == 0);
    CHECK(info_of(ip)["metric"] == "ip");
    CHECK(info_of(l2)["metric"] == "l2");
    CHECK(info_of(by_attribute)["metric"] == "ip");

    // Not normalised: the reconstructions keep the vectors' norms.
    const std::string decoded = dir.path("y.npy");
    REQUIRE(run_cli("decompress " + quote(ip) + " -o " + quote(decoded) + " --device cpu --quiet").exit_code == 0);
    run_python("import h5py, numpy as np\n"
               "y = np.load(" + quote(decoded) + ").astype(np.float64)\n"
               "with h5py.File(" + quote(data) + ", 'r') as f:\n"
               "    x = f['train'][:].astype(np.float64)\n"
               "nx, ny = np.linalg.norm(x, axis=1), np.linalg.norm(y, axis=1)\n"
               "assert ny.max() > 10 and np.abs(ny - nx).max() < 0.02 * nx.max(), np.abs(ny - nx).max()\n");

    const std::string on = " --queries " + quote(data) + " --ground-truth " + quote(data + ":neighbors");
    const std::string found = dir.path("found.hdf5");
    const nlohmann::json by_ip = query_json(quote(ip) + on + " --k 10 --nprobe all -o " + quote(found));
    CHECK(by_ip["metric"] == "ip");
    CHECK(by_ip["distance"] == "inner_product");
    CHECK(by_ip["recall"]["10-recall@10"].get<double>() >= 0.95);
    // The same codes ranked by squared L2 find few of the largest products.
    const nlohmann::json by_l2 = query_json(quote(l2) + on + " --k 10 --nprobe all");
    CHECK(by_l2["metric"] == "l2");
    CHECK(by_l2["distance"] == "squared_l2");
    CHECK(by_l2["recall"]["10-recall@10"].get<double>() < 0.5);

    // The distances are the inner products with the reconstructions, largest first, in the JSON and
    // in the -o file, which says what they are.
    run_python("import h5py, json, numpy as np\n"
               "y = np.load(" + quote(decoded) + ").astype(np.float64)\n"
               "with h5py.File(" + quote(data) + ", 'r') as f:\n"
               "    q = f['test'][:].astype(np.float64)\n"
               "ids = np.array(json.loads(" + quote(by_ip["ids"].dump()) + "))\n"
               "dist = np.array(json.loads(" + quote(by_ip["distances"].dump()) + "))\n"
               "want = np.einsum('qd,qkd->qk', q, y[ids])\n"
               "assert np.allclose(dist, want, rtol=1e-5, atol=1e-4), np.abs(dist - want).max()\n"
               "assert (np.diff(dist, axis=1) <= 0).all()\n"
               "with h5py.File(" + quote(found) + ", 'r') as f:\n"
               "    assert np.bytes_(f.attrs['distance']) == b'inner_product', f.attrs['distance']\n"
               "    assert (f['neighbors'][:] == ids).all() and np.array_equal(f['distances'][:], dist.astype('<f4'))\n");

    const CommandResult text = run_cli("query " + quote(ip) + on + " --device cpu");
    INFO(text.output);
    CHECK(text.exit_code == 0);
    CHECK_THAT(text.output, Contains("distances are inner products"));
}

// A residual code of 12 stages over 24 dimensions stores 12 x 256 x 24 centroids, more than the
// 3,000 vectors take in float32: the summary says the file is larger, not "1.0x smaller".
TEST_CASE("compress --codec rq says when the file is larger than the float32 vectors", "[cli][codes]") {
    const AnnFile ann;
    const std::string out = ann.dir.path("rq.vlat");
    const CommandResult run =
        run_cli("compress " + quote(ann.path) + " -o " + quote(out) + " -m 64 --iters 12 --device cpu --threads 2 "
                "--codec rq --stages 12");
    INFO(run.output);
    REQUIRE(run.exit_code == 0);
    CHECK_THAT(run.output, Contains("in 12 stages over 24 rotated dimensions"));
    CHECK_THAT(run.output, Contains("x larger than float32)"));
    const nlohmann::json info = info_of(out);
    CHECK(info["version"] == 4);
    CHECK(info["product"]["stages"] == 12);
    CHECK(info["ratio_to_float32"].get<double>() > 1.0);
}
