// What commands print besides their results: -q/--quiet on every command that prints, the "no usable
// GPU" note only for a run that has read its inputs (at most once, never under --quiet), and every
// input checked before any work, named pipes included.
#include "support.hpp"

#include "vlattice/device.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

using namespace vlattice::test;
using Catch::Contains;

namespace {

// 300 x 6 train, 10 queries and their true neighbours (numpy, brute force) in one HDF5 file, and a .vlat.
struct Files {
    ScratchDir dir;
    std::string data = dir.path("data.h5");
    std::string vlat = dir.path("data.vlat");
    std::string missing = dir.path("missing.npy");
    Files() {
        run_python("import h5py, numpy as np\n"
                   "rng = np.random.default_rng(9)\n"
                   "x = rng.normal(size=(300, 6)).astype('<f4')\n"
                   "q = rng.normal(size=(10, 6)).astype('<f4')\n"
                   "d = ((q[:, None, :] - x[None, :, :]) ** 2).sum(axis=2)\n"
                   "with h5py.File(" + quote(data) + ", 'w') as f:\n"
                   "    f['train'] = x\n"
                   "    f['test'] = q\n"
                   "    f['neighbors'] = np.argsort(d, axis=1)[:, :10].astype('<i4')\n");
        const CommandResult made =
            run_cli("compress " + quote(data) + " -o " + quote(vlat) + " -m 8 --device cpu --quiet");
        INFO(made.output);
        REQUIRE(made.exit_code == 0);
    }
};

std::size_t count_of(const std::string& text, const std::string& part) {
    std::size_t count = 0;
    for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) {
        ++count;
    }
    return count;
}

// The note --device auto prints where no GPU is usable; none is printed where one is.
std::size_t expected_notes() {
    return vlattice::gpu_status(0).usable ? 0 : 1;
}

}  // namespace

TEST_CASE("every command that prints takes -q and --quiet", "[cli][notes]") {
    for (const std::string command : {"compress", "decompress", "query", "compare", "batch"}) {
        INFO(command);
        const CommandResult help = run_cli(command + " --help");
        CHECK(help.exit_code == 0);
        CHECK_THAT(help.output, Contains("-q [ --quiet ]"));
    }
    const Files f;
    const CommandResult compress =
        run_cli("compress " + quote(f.data) + " -o " + quote(f.dir.path("q.vlat")) + " -m 8 -q");
    CHECK(compress.exit_code == 0);
    CHECK(compress.output.empty());
    const CommandResult decompress =
        run_cli("decompress " + quote(f.vlat) + " -o " + quote(f.dir.path("q.npy")) + " -q");
    CHECK(decompress.exit_code == 0);
    CHECK(decompress.output.empty());
    // The recall asked for by --ground-truth is all that query --quiet prints.
    for (const std::string quiet : {"-q", "--quiet"}) {
        const CommandResult query = run_cli("query " + quote(f.vlat) + " --queries " + quote(f.data) +
                                            " --ground-truth " + quote(f.data) + " " + quiet);
        INFO(query.output);
        CHECK(query.exit_code == 0);
        CHECK(query.output.rfind("recall      1-recall@1 ", 0) == 0);
        CHECK(count_of(query.output, "\n") == 2);
    }
}

TEST_CASE("a missing input with --device auto prints only the file's error", "[cli][notes]") {
    const Files f;
    const std::string error = f.missing + ": cannot open (No such file or directory)\n";
    const auto only_error = [&](const std::string& command, const std::string& arguments) {
        const CommandResult run = run_cli(command + " " + arguments + " --device auto");
        INFO(run.output);
        CHECK(run.exit_code == 1);
        CHECK(run.output == "vlattice " + command + ": error: " + error);
    };
    only_error("compress", quote(f.missing) + " -o " + quote(f.dir.path("x.vlat")));
    only_error("decompress", quote(f.vlat) + " -o " + quote(f.dir.path("x.npy")) + " --reference " + quote(f.missing));
    only_error("query", quote(f.vlat) + " --queries " + quote(f.missing));
    only_error("query", quote(f.vlat) + " --queries " + quote(f.data) + " --ground-truth " + quote(f.missing));
}

TEST_CASE("the no-GPU note comes once a run has its inputs, once per process, and never under --quiet",
          "[cli][notes]") {
    const Files f;
    const std::string note = "note: no usable GPU";
    const CommandResult compress =
        run_cli("compress " + quote(f.data) + " -o " + quote(f.dir.path("n.vlat")) + " -m 8");
    INFO(compress.output);
    CHECK(compress.exit_code == 0);
    CHECK(count_of(compress.output, note) == expected_notes());
    const CommandResult query = run_cli("query " + quote(f.vlat) + " --queries " + quote(f.data));
    INFO(query.output);
    CHECK(query.exit_code == 0);
    CHECK(count_of(query.output, note) == expected_notes());
    const CommandResult quiet = run_cli("query " + quote(f.vlat) + " --queries " + quote(f.data) + " -q");
    CHECK(quiet.exit_code == 0);
    CHECK(quiet.output.empty());
    // batch runs two jobs in one process: one note.
    const std::string other = f.dir.path("other.h5");
    std::filesystem::copy_file(f.data, other);
    const CommandResult batch =
        run_cli("batch " + quote(f.data) + " " + quote(other) + " -o " + quote(f.dir.path("batch")) + " -m 8");
    INFO(batch.output);
    CHECK(batch.exit_code == 0);
    CHECK(count_of(batch.output, note) == expected_notes());
}

TEST_CASE("a named pipe given as any input of a command is refused at once", "[cli][notes]") {
    const Files f;
    const auto pipe = [&](const std::string& name) {
        const std::string path = f.dir.path(name);
        REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
        return path;
    };
    const std::string vlat = pipe("pipe.vlat");
    const std::string npy = pipe("pipe.npy");
    const std::string h5 = pipe("pipe.h5");
    const std::string ivecs = pipe("pipe.ivecs");
    const std::vector<std::pair<std::string, std::string>> runs = {
        {"info " + quote(vlat), vlat},
        {"decompress " + quote(vlat) + " -o " + quote(f.dir.path("x.npy")), vlat},
        {"decompress " + quote(f.vlat) + " -o " + quote(f.dir.path("x.npy")) + " --reference " + quote(npy), npy},
        {"query " + quote(vlat) + " --queries " + quote(f.data), vlat},
        {"query " + quote(f.vlat) + " --queries " + quote(npy), npy},
        {"query " + quote(f.vlat) + " --queries " + quote(h5), h5},
        {"query " + quote(f.vlat) + " --queries " + quote(f.data) + " --ground-truth " + quote(ivecs), ivecs},
        {"query " + quote(f.vlat) + " --queries " + quote(f.data) + " --ground-truth " + quote(h5 + ":neighbors"), h5},
        {"compress " + quote(npy) + " -o " + quote(f.dir.path("x.vlat")), npy},
        {"compress " + quote(h5) + " -o " + quote(f.dir.path("x.vlat")), h5},
    };
    for (const auto& [arguments, path] : runs) {
        // timeout(1) turns a command that waits on the pipe for a writer into exit 124 and a failure.
        const CommandResult run = run_command("timeout 20 " + cli_command() + " " + arguments);
        INFO(arguments << "\n" << run.output);
        CHECK(run.exit_code == 1);
        CHECK_THAT(run.output, Contains("error: " + path + ": not a regular file"));
        CHECK_THAT(run.output, !Contains("note:"));
    }
}
