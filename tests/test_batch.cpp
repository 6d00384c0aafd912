// vlattice batch over HDF5 files written by h5py (through scripts/ann-hdf5) and other vector
// formats: outputs, the summary, a corrupt file failing only its own job, skipping what verifies and
// was made from the same input and options, --force, resuming after a batch is killed mid-job, one
// batch per folder, and the manifest reader.
#include "support.hpp"

#include "vlattice/batch_manifest.hpp"
#include "vlattice/codec.hpp"
#include "vlattice/format.hpp"
#include "vlattice/io.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

using namespace vlattice;
using namespace vlattice::test;
using Catch::Contains;
using Catch::EndsWith;

namespace {

void make_ann_file(const std::string& path, const std::string& shape) {
    const CommandResult made = run_command(std::string("'") + VLATTICE_SOURCE_DIR + "/scripts/ann-hdf5' synthetic " +
                                           shape + " " + quote(path) + " 2>&1");
    INFO(made.output);
    REQUIRE(made.exit_code == 0);
}

nlohmann::json summary(const std::string& folder) {
    std::ifstream in(folder + "/summary.json");
    REQUIRE(in.good());
    return nlohmann::json::parse(in);
}

std::vector<std::string> statuses(const nlohmann::json& rows) {
    std::vector<std::string> out;
    for (const nlohmann::json& row : rows) {
        out.push_back(row["status"].get<std::string>());
    }
    return out;
}

const char* const kRun = " -m 16 --iters 12 --device cpu --quiet";

}  // namespace

TEST_CASE("batch: two good files and a corrupt one, then a re-run that skips and one with --force", "[cli][batch]") {
    ScratchDir dir;
    const std::string a = dir.path("a.hdf5");
    const std::string b = dir.path("b.hdf5");
    const std::string broken = dir.path("broken.hdf5");
    make_ann_file(a, "1500 12 --queries 25 --clusters 20 --k 10");
    make_ann_file(b, "900 5 --queries 20 --clusters 8 --k 10 --seed 3");
    {
        std::ifstream in(a, std::ios::binary);
        std::string head(4000, '\0');
        in.read(head.data(), static_cast<std::streamsize>(head.size()));
        std::ofstream(broken, std::ios::binary) << head;
    }
    const std::string out = dir.path("out");
    const std::string files = quote(a) + " " + quote(broken) + " " + quote(b);

    const CommandResult first = run_cli("batch " + files + " -o " + quote(out) + kRun);
    INFO(first.output);
    CHECK(first.exit_code == 1);
    CHECK_THAT(first.output, Contains("broken.hdf5"));
    nlohmann::json rows = summary(out);
    REQUIRE(rows.size() == 3);
    CHECK(statuses(rows) == std::vector<std::string>{"ok", "failed", "ok"});
    CHECK_THAT(rows[1]["error"].get<std::string>(), Contains(broken));
    CHECK(rows[0]["n"] == 1500);
    CHECK(rows[0]["d"] == 12);
    CHECK(rows[0]["recall_at_10"].get<double>() > 0.0);
    CHECK(rows[0]["recall_at_10"].get<double>() <= 1.0);
    CHECK(std::filesystem::exists(out + "/b.vlat"));
    CHECK_FALSE(std::filesystem::exists(out + "/broken.vlat"));
    CHECK_FALSE(std::filesystem::exists(out + "/broken.results.h5"));
    std::ifstream csv(out + "/summary.csv");
    std::string header;
    std::getline(csv, header);
    CHECK_THAT(header, Contains("dataset,file,n,d,m,bytes_per_vector,ratio,residuals,energy,mse,recall_at_10") &&
                           Contains("device,status,error"));

    // The results file as h5py sees it, against the .vlat written beside it.
    const VlatFile vlat = read_vlat(out + "/a.vlat");
    run_python("import h5py, json, numpy as np\n"
               "f = h5py.File(" + quote(out + "/a.results.h5") + ", 'r')\n"
               "assert f['anchors'].shape == (" + std::to_string(vlat.anchors.rows) + ", 12), f['anchors'].shape\n"
               "assert f['anchors'].dtype == np.float32\n"
               "assert f['assignments'].shape == (1500,) and f['assignments'].dtype == np.uint32\n"
               "a = f['assignments'][:]\n"
               "assert a.max() < f['anchors'].shape[0]\n"
               "assert int(a[0]) == " + std::to_string(vlat.assignments[0]) + " and int(a[-1]) == " +
               std::to_string(vlat.assignments.back()) + "\n"
               "assert abs(float(f['anchors'][0, 0]) - " + std::to_string(vlat.anchors.row(0)[0]) + ") < 1e-5\n"
               "m = json.loads(f.attrs['metrics'])\n"
               "assert m['status'] == 'ok' and m['n'] == 1500 and 0 < m['recall_at_10'] <= 1, m\n"
               "assert json.loads(f.attrs['config'])['metric'] == 'l2'\n"
               "assert int(f.attrs['n']) == 1500 and int(f.attrs['d']) == 12\n");

    const auto written = std::filesystem::last_write_time(out + "/a.vlat");
    const CommandResult again = run_cli("batch " + files + " -o " + quote(out) + kRun);
    CHECK(again.exit_code == 1);
    rows = summary(out);
    CHECK(statuses(rows) == std::vector<std::string>{"skipped", "failed", "skipped"});
    CHECK(std::filesystem::last_write_time(out + "/a.vlat") == written);

    const CommandResult forced = run_cli("batch " + quote(a) + " " + quote(b) + " -o " + quote(out) + kRun + " --force");
    CHECK(forced.exit_code == 0);
    CHECK(statuses(summary(out)) == std::vector<std::string>{"ok", "ok"});
}

TEST_CASE("batch: a manifest sets per-job options and a bad one is refused", "[cli][batch]") {
    ScratchDir dir;
    make_ann_file(dir.path("x.hdf5"), "800 6 --queries 10 --clusters 6 --k 10");
    std::ofstream(dir.path("jobs.json")) << R"({"jobs": [{"file": "x.hdf5", "name": "x8", "anchors": 8},
                                                         {"file": "x.hdf5", "name": "x24", "anchors": 24, "bits": 8}]})";
    const std::string out = dir.path("out");
    const CommandResult run = run_cli("batch --manifest " + quote(dir.path("jobs.json")) + " -o " + quote(out) + kRun);
    INFO(run.output);
    REQUIRE(run.exit_code == 0);
    const nlohmann::json rows = summary(out);
    REQUIRE(rows.size() == 2);
    CHECK(rows[0]["m"] == 8);
    CHECK(rows[1]["m"] == 24);
    CHECK(rows[0]["residuals"] == "none");
    CHECK(rows[1]["residuals"] == "6 x 8 bits");
    CHECK(rows[1]["bytes_per_vector"].get<double>() == Approx(6.625));  // 5-bit ids + 6 bytes of codes
    CHECK(rows[1]["mse"].get<double>() < 1e-2 * rows[1]["energy"].get<double>());
    CHECK(rows[1]["recall_at_10"].get<double>() > rows[0]["recall_at_10"].get<double>());

    // 4294967298 is 2^32 + 2: it must not pass as 2.
    for (const char* bits : {"3", "4294967298", "-2", "2.0", "\"2\""}) {
        std::ofstream(dir.path("odd.json")) << R"({"jobs": [{"file": "x.hdf5", "bits": )" << bits << "}]}";
        const CommandResult odd = run_cli("batch --manifest " + quote(dir.path("odd.json")) + " -o " + quote(out) + kRun);
        INFO("bits " << bits);
        CHECK(odd.exit_code == 2);
        CHECK_THAT(odd.output, Contains("\"bits\" must be 0, 2, 4 or 8"));
    }

    // A name is a file name in the output folder, not a path out of it.
    for (const char* name : {"../escape", "", "a/b", ".."}) {
        std::ofstream(dir.path("named.json")) << R"({"jobs": [{"file": "x.hdf5", "name": ")" << name << R"("}]})";
        const CommandResult named = run_cli("batch --manifest " + quote(dir.path("named.json")) + " -o " + quote(out) + kRun);
        INFO("name '" << name << "': " << named.output);
        CHECK(named.exit_code == 2);
        CHECK_THAT(named.output, Contains("a name must be a plain file name"));
    }
    CHECK_FALSE(std::filesystem::exists(dir.path("escape.vlat")));
    // A job's output may not be a file some job reads.
    std::filesystem::copy_file(dir.path("x.hdf5"), dir.path("out/y.results.h5"));
    std::ofstream(dir.path("over.json")) << R"({"jobs": [{"file": "out/y.results.h5", "name": "y"}]})";
    const CommandResult over = run_cli("batch --manifest " + quote(dir.path("over.json")) + " -o " + quote(out) + kRun);
    INFO(over.output);
    CHECK(over.exit_code == 2);
    CHECK_THAT(over.output, Contains("writing it would replace the data being read"));
    CHECK(read_file(dir.path("out/y.results.h5")) == read_file(dir.path("x.hdf5")));

    std::ofstream(dir.path("bad.json")) << R"({"jobs": [{"file": "x.hdf5", "anchor": 8}]})";
    const CommandResult bad = run_cli("batch --manifest " + quote(dir.path("bad.json")) + " -o " + quote(out) + kRun);
    CHECK(bad.exit_code == 2);
    CHECK_THAT(bad.output, Contains("job 1") && Contains("unknown key \"anchor\""));
    CHECK(run_cli("batch -o " + quote(out) + kRun).exit_code == 2);
    for (const char* entry : {R"({"file": 5})", R"({"file": ""})", R"({"name": "x"})", "5"}) {
        std::ofstream(dir.path("entry.json")) << R"({"jobs": [)" << entry << "]}";
        const CommandResult odd = run_cli("batch --manifest " + quote(dir.path("entry.json")) + " -o " + quote(out) + kRun);
        INFO(entry << ": " << odd.output);
        CHECK(odd.exit_code == 2);
        CHECK_THAT(odd.output, Contains("job 1: expected an object with a \"file\" that names one"));
    }

    // An output folder that cannot be one is named.
    write_file(dir.path("file"), "a file, not a folder\n");
    for (const std::string& folder : {dir.path("file"), dir.path("file/sub")}) {
        const CommandResult not_folder = run_cli("batch " + quote(dir.path("x.hdf5")) + " -o " + quote(folder) + kRun);
        INFO(not_folder.output);
        CHECK(not_folder.exit_code == 1);
        CHECK_THAT(not_folder.output, Contains(folder + ": cannot create the output folder"));
    }
    const CommandResult empty = run_cli("batch " + quote(dir.path("x.hdf5")) + " -o ''" + kRun);
    INFO(empty.output);
    CHECK(empty.exit_code == 2);
    CHECK_THAT(empty.output, Contains("the output folder's path is empty"));
}

TEST_CASE("batch: a setting that would stop a later job is refused before the first job runs", "[cli][batch]") {
    ScratchDir dir;
    make_ann_file(dir.path("x.hdf5"), "400 6 --queries 10 --clusters 6 --k 10");
    const std::string out = dir.path("out");
    const auto refused = [&](const std::string& last_job, const std::string& options, const std::string& message) {
        std::ofstream(dir.path("jobs.json")) << R"({"jobs": [{"file": "x.hdf5", "name": "first"}, )" << last_job << "]}";
        const CommandResult run =
            run_cli("batch --manifest " + quote(dir.path("jobs.json")) + " -o " + quote(out) + kRun + options);
        INFO(last_job << options << ": " << run.output);
        CHECK(run.exit_code == 2);
        CHECK_THAT(run.output, Contains(message));
        CHECK_FALSE(std::filesystem::exists(out + "/first.vlat"));
    };
    refused(R"({"file": "x.hdf5", "name": "second", "device": "tpu"})", "",
            "job 2 (" + dir.path("x.hdf5") + "): --device: expected auto, cpu or cuda, got 'tpu'");
    refused(R"({"file": "x.hdf5", "name": "second", "metric": "hamming"})", "",
            "job 2 (" + dir.path("x.hdf5") + "): metric: expected 'l2', 'angular' or 'ip', got 'hamming'");
    refused(R"({"file": "x.hdf5", "name": "second", "bits": 4})", " --target-ratio 10%",
            "job 2 (" + dir.path("x.hdf5") + "): the manifest's \"bits\" and the budget (--target-bytes");
    refused(R"({"file": "x.hdf5", "name": "second"})", " --bits 3", "--bits must be 0, 2, 4 or 8, got 3");
    // A bad option of the command is named as its own, though every job takes a copy of it.
    const CommandResult own =
        run_cli("batch --manifest " + quote(dir.path("jobs.json")) + " -o " + quote(out) + kRun + " --trim 1");
    INFO(own.output);
    CHECK(own.exit_code == 2);
    CHECK_THAT(own.output, Contains("--trim") && Contains("in [0, 1)") && !Contains("job "));
    const CommandResult metric = run_cli("batch --manifest " + quote(dir.path("jobs.json")) + " -o " + quote(out) +
                                         kRun + " --metric hamming");
    INFO(metric.output);
    CHECK(metric.exit_code == 2);
    CHECK_THAT(metric.output, Contains("metric: expected 'l2', 'angular' or 'ip', got 'hamming'") && !Contains("job "));
}

TEST_CASE("batch: a file whose 'distance' is 'ip' is compressed as ip and its recall ranks by inner product",
          "[cli][batch][ip]") {
    ScratchDir dir;
    const std::string file = dir.path("ip.hdf5");
    // Vectors of very different norms, with their exact 10 largest inner products as `neighbors`.
    run_python("import h5py, numpy as np\n"
               "rng = np.random.default_rng(5)\n"
               "train = (rng.normal(size=(1500, 12)) * rng.uniform(0.5, 20.0, size=(1500, 1))).astype('<f4')\n"
               "test = rng.normal(size=(30, 12)).astype('<f4')\n"
               "dots = test.astype(np.float64) @ train.astype(np.float64).T\n"
               "with h5py.File(" + quote(file) + ", 'w') as f:\n"
               "    f['train'], f['test'] = train, test\n"
               "    f['neighbors'] = np.argsort(-dots, axis=1, kind='stable')[:, :10].astype('<i4')\n"
               "    f.attrs['distance'] = 'ip'\n");
    const std::string out = dir.path("out");
    const CommandResult run = run_cli("batch " + quote(file) + " -o " + quote(out) + kRun + " --bits 8");
    INFO(run.output);
    REQUIRE(run.exit_code == 0);
    const nlohmann::json rows = summary(out);
    REQUIRE(rows.size() == 1);
    CHECK(rows[0]["recall_at_10"].get<double>() >= 0.95);
    CHECK(read_vlat(out + "/ip.vlat").metric == Metric::ip);
    run_python("import h5py, json\n"
               "with h5py.File(" + quote(out + "/ip.results.h5") + ", 'r') as f:\n"
               "    assert json.loads(f.attrs['config'])['metric'] == 'ip'\n");
}

TEST_CASE("batch: killed in the middle of a job, then re-run, completes with every output verifying", "[cli][batch]") {
    ScratchDir dir;
    const std::string small = dir.path("small.hdf5");
    const std::string large = dir.path("large.hdf5");
    make_ann_file(small, "600 8 --queries 10 --clusters 5 --k 10");
    make_ann_file(large, "300000 32 --queries 5 --clusters 50 --k 10");
    const std::string out = dir.path("out");
    const std::string cli = cli_command();
    const std::string files = quote(small) + " " + quote(large);
    // The summary names the small job once it is done; the large one has then only begun.
    const CommandResult killed = run_command(
        "(" + cli + " batch " + files + " -o " + quote(out) + " -m 256 --iters 5 --device cpu --quiet & pid=$!; "
        "for i in $(seq 1 1200); do grep -q small " + quote(out + "/summary.json") + " 2>/dev/null && break; "
        "sleep 0.05; done; kill -9 $pid; wait $pid; echo killed:$?)");
    INFO(killed.output);
    CHECK_THAT(killed.output, Contains("killed:137"));
    CHECK(std::filesystem::exists(out + "/small.vlat"));
    CHECK_FALSE(std::filesystem::exists(out + "/large.vlat"));
    CHECK_FALSE(std::filesystem::exists(out + "/large.results.h5"));
    CHECK(summary(out).size() == 1);

    const CommandResult resumed = run_cli("batch " + files + " -o " + quote(out) + " -m 256 --iters 5 --device cpu --quiet");
    INFO(resumed.output);
    CHECK(resumed.exit_code == 0);
    CHECK(statuses(summary(out)) == std::vector<std::string>{"skipped", "ok"});
    CHECK_NOTHROW(read_vlat(out + "/small.vlat"));
    CHECK_NOTHROW(read_vlat(out + "/large.vlat"));
}

namespace {

nlohmann::json row_named(const nlohmann::json& rows, const std::string& name) {
    for (const nlohmann::json& row : rows) {
        if (row["dataset"] == name) {
            return row;
        }
    }
    FAIL("no summary row for " << name << ": " << rows.dump());
    return {};
}

// An ann-benchmarks file written directly: train n x d, test q x d_test, neighbors q x 10 (int32)
// from `neighbors` (a Python expression over n and q).
void make_custom_ann_file(const std::string& path, int n, int d, int q, int d_test, const std::string& neighbors) {
    run_python("import h5py, numpy as np\n"
               "rng = np.random.default_rng(5)\n"
               "n, q = " + std::to_string(n) + ", " + std::to_string(q) + "\n"
               "with h5py.File(" + quote(path) + ", 'w') as f:\n"
               "    f['train'] = rng.normal(size=(n, " + std::to_string(d) + ")).astype(np.float32)\n"
               "    f['test'] = rng.normal(size=(q, " + std::to_string(d_test) + ")).astype(np.float32)\n"
               "    f['neighbors'] = (" + neighbors + ").astype(np.int32)\n");
}

}  // namespace

TEST_CASE("batch: a manifest must be a regular file, named when it is not", "[cli][batch]") {
    ScratchDir dir;
    make_ann_file(dir.path("x.hdf5"), "300 4 --queries 10 --clusters 4 --k 10");
    const std::string out = dir.path("out");
    const std::string fifo = dir.path("jobs.fifo");
    REQUIRE(run_command("mkfifo " + quote(fifo)).exit_code == 0);
    // Nothing ever writes the FIFO: a reader that opens it blocks for good.
    const CommandResult piped =
        run_command("timeout 60 " + cli_command() + " batch --manifest " + quote(fifo) + " -o " + quote(out) + kRun);
    INFO(piped.output);
    CHECK(piped.exit_code == 2);
    CHECK_THAT(piped.output, Contains(fifo + ": not a regular file"));

    const CommandResult folder = run_cli("batch --manifest " + quote(dir.dir()) + " -o " + quote(out) + kRun);
    INFO(folder.output);
    CHECK(folder.exit_code == 2);
    CHECK_THAT(folder.output, Contains(dir.dir() + ": not a regular file") && !Contains("basic_filebuf"));

    const CommandResult missing = run_cli("batch --manifest " + quote(dir.path("none.json")) + " -o " + quote(out) + kRun);
    INFO(missing.output);
    CHECK(missing.exit_code == 2);
    CHECK_THAT(missing.output, Contains(dir.path("none.json") + ": cannot open"));
    CHECK_FALSE(std::filesystem::exists(out));

    // A link is followed to the file it names; the jobs' paths stay relative to the link's folder.
    std::filesystem::create_directories(dir.path("real"));
    write_file(dir.path("real/jobs.json"), R"({"jobs": [{"file": "x.hdf5", "name": "linked"}]})");
    std::filesystem::create_symlink(dir.path("real/jobs.json"), dir.path("jobs.json"));
    const CommandResult linked = run_cli("batch --manifest " + quote(dir.path("jobs.json")) + " -o " + quote(out) + kRun);
    INFO(linked.output);
    CHECK(linked.exit_code == 0);
    CHECK(std::filesystem::exists(out + "/linked.vlat"));
}

TEST_CASE("batch: the manifest reader is a library call that names the file, the job and the key", "[batch]") {
    ScratchDir dir;
    write_file(dir.path("jobs.json"), R"({"jobs": [{"file": "a.npy"}, {"file": "/data/b.hdf5", "name": "b",
        "anchors": 12, "metric": "angular", "device": "cpu", "dataset": "base", "bits": 4}]})");
    const std::vector<ManifestJob> jobs = read_batch_manifest(dir.path("jobs.json"));
    REQUIRE(jobs.size() == 2);
    CHECK(jobs[0].file == dir.path("a.npy"));
    CHECK_FALSE(jobs[0].name);
    CHECK_FALSE(jobs[0].anchors);
    CHECK(jobs[1].file == "/data/b.hdf5");
    CHECK(*jobs[1].name == "b");
    CHECK(*jobs[1].anchors == 12);
    CHECK(*jobs[1].metric == "angular");
    CHECK(*jobs[1].device == "cpu");
    CHECK(*jobs[1].dataset == "base");
    CHECK(*jobs[1].bits == 4);
    // A bare list is a manifest too.
    write_file(dir.path("list.json"), R"([{"file": "c.fvecs"}])");
    CHECK(read_batch_manifest(dir.path("list.json")).at(0).file == dir.path("c.fvecs"));

    const auto refused = [&](const std::string& text, const std::string& message) {
        write_file(dir.path("bad.json"), text);
        INFO(text);
        CHECK_THROWS_WITH(read_batch_manifest(dir.path("bad.json")), Contains(dir.path("bad.json") + ": " + message));
    };
    refused(R"({"jobs": [{"file": "a"}, {"file": "b", "anchors": 0}]})", "job 2: \"anchors\" must be a whole number >= 1");
    refused(R"([{"file": "a", "anchors": 9223372036854775808}])", "job 1: \"anchors\" must be a whole number >= 1");
    refused(R"([{"file": "a", "name": 5}])", "job 1: \"name\" must be text");
    refused("[{\"file\": \"a\", \"x\\u001b[2J\": 1}]", "job 1: unknown key \"x\\u001b[2J\"");
    refused(R"({"jobs": 5})", "expected {\"jobs\": [...]} or a list of jobs");
    write_file(dir.path("bad.json"), "{\"jobs\": [");
    CHECK_THROWS_WITH(read_batch_manifest(dir.path("bad.json")), Contains(dir.path("bad.json") + " is not valid JSON"));
    refused("", "empty file");
}

TEST_CASE("batch: a re-run with other options or another input redoes the job and says why", "[cli][batch]") {
    ScratchDir dir;
    const std::string a = dir.path("a.hdf5");
    make_ann_file(a, "600 6 --queries 10 --clusters 6 --k 10");
    const std::string out = dir.path("out");
    const std::string run = "batch " + quote(a) + " -o " + quote(out) + " --iters 12 --device cpu";
    REQUIRE(run_cli(run + " -m 8 --quiet").exit_code == 0);
    CHECK(row_named(summary(out), "a")["m"] == 8);

    const CommandResult more = run_cli(run + " -m 16");
    INFO(more.output);
    CHECK(more.exit_code == 0);
    CHECK_THAT(more.output, Contains("a: redone: --anchors changed 8 -> 16"));
    nlohmann::json row = row_named(summary(out), "a");
    CHECK(row["status"] == "ok");
    CHECK(row["m"].get<int>() > 8);
    CHECK(row["redone"] == "--anchors changed 8 -> 16");

    // Quiet, the summary still says why.
    const CommandResult bits = run_cli(run + " -m 16 --bits 4 --quiet");
    INFO(bits.output);
    CHECK(bits.exit_code == 0);
    CHECK(bits.output.empty());
    row = row_named(summary(out), "a");
    CHECK(row["status"] == "ok");
    CHECK(row["residuals"] == "6 x 4 bits");
    CHECK(row["redone"] == "--bits changed 0 -> 4");
    std::ifstream csv(out + "/summary.csv");
    std::string header;
    std::string line;
    std::getline(csv, header);
    std::getline(csv, line);
    CHECK_THAT(header, EndsWith(",status,error,redone"));
    CHECK_THAT(line, EndsWith(",ok,,--bits changed 0 -> 4"));

    // The same options again: nothing to redo, and the row keeps the finished run's numbers.
    const double energy = row["energy"].get<double>();
    CHECK(run_cli(run + " -m 16 --bits 4 --quiet").exit_code == 0);
    row = row_named(summary(out), "a");
    CHECK(row["status"] == "skipped");
    CHECK(row["energy"].get<double>() == energy);
    CHECK(row["residuals"] == "6 x 4 bits");

    // The same bytes under a new modification time are the same input.
    std::filesystem::last_write_time(a, std::filesystem::last_write_time(a) + std::chrono::hours(1));
    CHECK(run_cli(run + " -m 16 --bits 4 --quiet").exit_code == 0);
    CHECK(row_named(summary(out), "a")["status"] == "skipped");

    // Other bytes of the same shape are not.
    make_ann_file(a, "600 6 --queries 10 --clusters 6 --k 10 --seed 9");
    const CommandResult changed = run_cli(run + " -m 16 --bits 4");
    INFO(changed.output);
    CHECK(changed.exit_code == 0);
    CHECK_THAT(changed.output, Contains("a: redone: the input changed since its outputs were made"));
    row = row_named(summary(out), "a");
    CHECK(row["status"] == "ok");
    CHECK(row["energy"].get<double>() != energy);

    // A .vlat that is not the one its results file was written with: the same fit, its anchors
    // stored as float16, so of the same shape and valid, but other bytes.
    const std::string other = dir.path("other.vlat");
    REQUIRE(run_cli("compress " + quote(a) + " -o " + quote(other) + " --iters 12 --device cpu -m 16 --bits 4 "
                    "--anchor-storage f16 --quiet").exit_code == 0);
    std::filesystem::copy_file(other, out + "/a.vlat", std::filesystem::copy_options::overwrite_existing);
    const CommandResult swapped = run_cli(run + " -m 16 --bits 4");
    INFO(swapped.output);
    CHECK(swapped.exit_code == 0);
    CHECK_THAT(swapped.output, Contains("a: redone: " + out + "/a.vlat is not the .vlat that " + out +
                                        "/a.results.h5 was written with"));

    // Outputs that do not record what they were made from (as an older vlattice wrote them).
    run_python("import h5py, json\n"
               "with h5py.File(" + quote(out + "/a.results.h5") + ", 'r+') as f:\n"
               "    config = json.loads(f.attrs['config'])\n"
               "    assert config['made_from']['options']['anchors'] == 16, config\n"
               "    assert config['made_from']['input']['bytes'] == " +
               std::to_string(std::filesystem::file_size(a)) + ", config\n"
               "    del config['made_from']\n"
               "    f.attrs['config'] = json.dumps(config)\n");
    const CommandResult unrecorded = run_cli(run + " -m 16 --bits 4");
    INFO(unrecorded.output);
    CHECK(unrecorded.exit_code == 0);
    CHECK_THAT(unrecorded.output, Contains("a: redone: " + out + "/a.results.h5 does not record the input and options"));
    CHECK(row_named(summary(out), "a")["status"] == "ok");
}

TEST_CASE("batch: --train-sample fits each job on a sample and codes every row, as compress does", "[cli][batch]") {
    ScratchDir dir;
    const std::string a = dir.path("a.hdf5");
    make_ann_file(a, "3000 6 --queries 10 --clusters 6 --k 10");
    const std::string out = dir.path("out");
    const std::string options = " -m 8 --iters 12 --device cpu --bits 4 --seed 5 --quiet";
    const std::string run = "batch " + quote(a) + " -o " + quote(out) + options;
    REQUIRE(run_cli(run + " --train-sample 500").exit_code == 0);
    nlohmann::json row = row_named(summary(out), "a");
    CHECK(row["status"] == "ok");
    CHECK(row["n"] == 3000);
    CHECK(row["train_rows"] == 500);
    REQUIRE(run_cli("compress " + quote(a) + " -o " + quote(dir.path("c.vlat")) + options + " --train-sample 500")
                .exit_code == 0);
    // The same anchors, assignments and codes; only the metadata differs.
    const VlatFile batched = read_vlat(out + "/a.vlat");
    const VlatFile compressed = read_vlat(dir.path("c.vlat"));
    CHECK(batched.n == 3000);
    REQUIRE(batched.sections.size() == compressed.sections.size());
    for (std::size_t s = 0; s < batched.sections.size(); ++s) {
        INFO(batched.sections[s].tag);
        CHECK(batched.sections[s].tag == compressed.sections[s].tag);
        if (batched.sections[s].tag != "META") {
            CHECK(batched.sections[s].checksum == compressed.sections[s].checksum);
        }
    }
    // The results hold every row's anchor, and the MSE is every row's.
    run_python("import h5py\n"
               "with h5py.File(" + quote(out + "/a.results.h5") + ", 'r') as f:\n"
               "    assert f['assignments'].shape[0] == 3000, f['assignments'].shape\n");
    CHECK(row["mse"].get<double>() == Approx(reconstruction_mse(batched, read_vectors(a))).epsilon(1e-12));

    // Another sample is another option: the job runs again.
    const CommandResult more = run_cli("batch " + quote(a) + " -o " + quote(out) + " -m 8 --iters 12 --device cpu "
                                       "--bits 4 --seed 5 --train-sample 800");
    INFO(more.output);
    CHECK(more.exit_code == 0);
    CHECK_THAT(more.output, Contains("a: redone: --train-sample changed 500 -> 800"));
    CHECK(row_named(summary(out), "a")["train_rows"] == 800);

    // A sample smaller than the anchors fails the job, naming both.
    CHECK(run_cli(run + " --train-sample 4").exit_code == 1);
    row = row_named(summary(out), "a");
    CHECK(row["status"] == "failed");
    CHECK_THAT(row["error"].get<std::string>(), Contains("--train-sample 4 draws fewer rows than the 8 anchors"));
}

TEST_CASE("batch: a whole-file budget holds every job's file, and a new budget redoes the job", "[cli][batch]") {
    ScratchDir dir;
    const std::string a = dir.path("a.hdf5");
    make_ann_file(a, "600 6 --queries 10 --clusters 6 --k 10");
    const std::string out = dir.path("out");
    const std::string run = "batch " + quote(a) + " -o " + quote(out) + " --iters 12 --device cpu -m 16";
    for (const double budget : {40.0, 60.0}) {
        INFO("budget " << budget);
        const CommandResult done = run_cli(run + " --target-file-bytes " + std::to_string(budget));
        INFO(done.output);
        REQUIRE(done.exit_code == 0);
        const nlohmann::json row = row_named(summary(out), "a");
        CHECK(row["status"] == "ok");
        CHECK(static_cast<double>(std::filesystem::file_size(out + "/a.vlat")) <= budget * 600.0);
        const nlohmann::json metadata = nlohmann::json::parse(vlattice::read_vlat(out + "/a.vlat").metadata_json);
        CHECK(metadata["residuals"]["target_file_bytes"] == budget);
        if (budget == 60.0) {
            CHECK_THAT(done.output, Contains("a: redone: --target-file-bytes changed 40.0 -> 60.0"));
        }
    }
}

TEST_CASE("batch: neighbour ids outside the training set fail the job, as query refuses them", "[cli][batch]") {
    ScratchDir dir;
    for (const auto& [bad, id] : {std::pair<std::string, std::string>{"np.full((q, 10), 7)", ""},
                                  {"np.where(np.arange(q * 10).reshape(q, 10) == 23, n, 1)", "300"},
                                  {"np.where(np.arange(q * 10).reshape(q, 10) == 23, -1, 1)", "-1"}}) {
        make_custom_ann_file(dir.path("x.hdf5"), 300, 4, 5, 4, bad);
        const std::string out = dir.path("out" + id);
        const CommandResult run = run_cli("batch " + quote(dir.path("x.hdf5")) + " -o " + quote(out) + kRun);
        INFO(bad << ": " << run.output);
        if (id.empty()) {
            CHECK(run.exit_code == 0);
            continue;
        }
        CHECK(run.exit_code == 1);
        const nlohmann::json row = row_named(summary(out), "x");
        CHECK(row["status"] == "failed");
        CHECK_THAT(row["error"].get<std::string>(),
                   Contains(dir.path("x.hdf5") + ":neighbors: row 2 (0-based), column 3 (0-based) holds " + id +
                            ", not a vector id in [0, 300)"));
    }
}

TEST_CASE("batch: a second batch into a folder that one is writing is refused", "[cli][batch]") {
    ScratchDir dir;
    make_ann_file(dir.path("x.hdf5"), "300 4 --queries 10 --clusters 4 --k 10");
    const std::string out = dir.path("out");
    const std::string lock = out + "/.vlattice-batch.lock";
    std::filesystem::create_directories(out);
    // flock(1) holds the lock the way a running batch does, and the shell it starts writes its pid.
    write_file(dir.path("hold.sh"), "echo $$ > " + quote(lock) + "\necho holder=$$\n" + cli_command() + " batch " +
                                        quote(dir.path("x.hdf5")) + " -o " + quote(out) + kRun + "\necho exit=$?\n");
    const CommandResult held = run_command("flock " + quote(lock) + " sh " + quote(dir.path("hold.sh")));
    INFO(held.output);
    const std::size_t at = held.output.find("holder=");
    REQUIRE(at != std::string::npos);
    const std::string pid = held.output.substr(at + 7, held.output.find('\n', at) - at - 7);
    CHECK_THAT(held.output, Contains("exit=1"));
    CHECK_THAT(held.output, Contains(out + ": another vlattice batch (process " + pid + ") is writing to this output "
                                           "folder"));
    CHECK_FALSE(std::filesystem::exists(out + "/summary.json"));
    CHECK_FALSE(std::filesystem::exists(out + "/x.vlat"));

    // The lock ends with its holder; the file it leaves behind does not stop the next batch.
    const CommandResult after = run_cli("batch " + quote(dir.path("x.hdf5")) + " -o " + quote(out) + kRun);
    INFO(after.output);
    CHECK(after.exit_code == 0);
    CHECK(summary(out).size() == 1);
}

TEST_CASE("batch: a job that fails after its fit leaves no output of its own, and earlier ones as they were",
          "[cli][batch]") {
    ScratchDir dir;
    const std::string out = dir.path("out");
    // The test queries have one dimension more than the training vectors.
    make_custom_ann_file(dir.path("wide.hdf5"), 300, 4, 5, 5, "np.ones((q, 10))");
    const CommandResult wide = run_cli("batch " + quote(dir.path("wide.hdf5")) + " -o " + quote(out) + kRun);
    INFO(wide.output);
    CHECK(wide.exit_code == 1);
    CHECK_THAT(row_named(summary(out), "wide")["error"].get<std::string>(),
               Contains(dir.path("wide.hdf5") + ":test: the queries have 5 dimensions, " + dir.path("wide.hdf5") +
                        ":train has 4"));
    CHECK_FALSE(std::filesystem::exists(out + "/wide.vlat"));
    CHECK_FALSE(std::filesystem::exists(out + "/wide.results.h5"));

    // Redone with more anchors where the file size limit lets the small .vlat be written but not the
    // results file, 80 kB of assignments: the previous pair stays, whole.
    make_custom_ann_file(dir.path("big.hdf5"), 20000, 4, 5, 4, "np.ones((q, 10))");
    const std::string big =
        "batch " + quote(dir.path("big.hdf5")) + " -o " + quote(out) + " --iters 12 --device cpu --quiet";
    REQUIRE(run_cli(big + " -m 8").exit_code == 0);
    const std::string vlat = read_file(out + "/big.vlat");
    const std::string results = read_file(out + "/big.results.h5");
    // Ignored, SIGXFSZ turns a write past the limit into an error (EFBIG) instead of the end.
    const CommandResult limited =
        run_command("trap '' XFSZ; ulimit -f 60; " + cli_command() + " " + big + " -m 9 --force");
    INFO(limited.output);
    CHECK(limited.exit_code == 1);
    CHECK(row_named(summary(out), "big")["status"] == "failed");
    CHECK(read_file(out + "/big.vlat") == vlat);
    CHECK(read_file(out + "/big.results.h5") == results);
    for (const auto& entry : std::filesystem::directory_iterator(out)) {
        CHECK_THAT(entry.path().filename().string(), !Contains(".tmp."));
    }
}

TEST_CASE("batch: .npy, .fvecs and .fbin inputs, given as files or in a manifest, have no recall", "[cli][batch]") {
    ScratchDir dir;
    make_ann_file(dir.path("a.hdf5"), "400 6 --queries 10 --clusters 6 --k 10");
    run_python("import numpy as np, struct\n"
               "rng = np.random.default_rng(3)\n"
               "x = rng.normal(size=(300, 6)).astype(np.float32)\n"
               "np.save(" + quote(dir.path("v.npy")) + ", x)\n"
               "with open(" + quote(dir.path("w.fvecs")) + ", 'wb') as f:\n"
               "    for row in x[:250]:\n"
               "        f.write(struct.pack('<i', 6) + row.tobytes())\n"
               "with open(" + quote(dir.path("u.fbin")) + ", 'wb') as f:\n"
               "    f.write(struct.pack('<ii', 200, 6) + x[:200].tobytes())\n");
    write_file(dir.path("jobs.json"), R"({"jobs": [{"file": "u.fbin", "anchors": 4, "bits": 2}]})");
    const std::string out = dir.path("out");
    const CommandResult run = run_cli("batch " + quote(dir.path("v.npy")) + " " + quote(dir.path("w.fvecs")) + " " +
                                      quote(dir.path("a.hdf5")) + " --manifest " + quote(dir.path("jobs.json")) +
                                      " -o " + quote(out) + kRun);
    INFO(run.output);
    CHECK(run.exit_code == 0);
    const nlohmann::json rows = summary(out);
    CHECK(statuses(rows) == std::vector<std::string>{"ok", "ok", "ok", "ok"});
    CHECK(row_named(rows, "v")["n"] == 300);
    CHECK(row_named(rows, "w")["n"] == 250);
    CHECK(row_named(rows, "u")["n"] == 200);
    CHECK(row_named(rows, "u")["m"] == 4);
    CHECK(row_named(rows, "u")["residuals"] == "6 x 2 bits");
    for (const char* name : {"v", "w", "u"}) {
        INFO(name);
        CHECK(row_named(rows, name)["recall_at_10"].is_null());
        CHECK(read_vlat(out + "/" + name + ".vlat").n == row_named(rows, name)["n"].get<std::uint64_t>());
        CHECK(std::filesystem::exists(out + "/" + name + ".results.h5"));
    }
    CHECK(row_named(rows, "a")["recall_at_10"].get<double>() > 0.0);
    std::ifstream csv(out + "/summary.csv");
    std::string line;
    std::getline(csv, line);
    std::getline(csv, line);
    std::vector<std::string> fields(1);
    for (const char c : line) {
        if (c == ',') {
            fields.emplace_back();
        } else {
            fields.back().push_back(c);
        }
    }
    // dataset,file,n,d,m,bytes_per_vector,ratio,residuals,energy,mse,recall_at_10,...
    REQUIRE(fields.size() > 10);
    CHECK(fields[0] == "v");
    CHECK(fields[10].empty());
    // The re-run finds them all done.
    CHECK(run_cli("batch " + quote(dir.path("v.npy")) + " " + quote(dir.path("w.fvecs")) + " " +
                  quote(dir.path("a.hdf5")) + " --manifest " + quote(dir.path("jobs.json")) + " -o " + quote(out) +
                  kRun).exit_code == 0);
    CHECK(statuses(summary(out)) == std::vector<std::string>{"skipped", "skipped", "skipped", "skipped"});
}
