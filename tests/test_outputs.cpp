// Outputs: written under temporary names that fit any legal output name, renamed into place together
// only when the whole run succeeded, and the temporaries a killed run left removed by the next run.
#include "format/temporary_files.hpp"
#include "support.hpp"

#include "vlattice/atomic_file.hpp"
#include "vlattice/io.hpp"

#include <catch2/catch.hpp>
#include <unistd.h>

#include <climits>
#include <filesystem>
#include <fstream>
#include <optional>

using namespace vlattice;
using namespace vlattice::test;
using Catch::Contains;

namespace {

const std::string kPrevious = "the output of an earlier run, which a failed run must leave as it is\n";

// Names in `dir` that a writer left under a temporary name.
std::vector<std::string> temporaries_in(const std::string& dir) {
    std::vector<std::string> left;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        if (entry.path().filename().string().find(".tmp.") != std::string::npos) {
            left.push_back(entry.path().filename().string());
        }
    }
    return left;
}

std::string sample_input(const ScratchDir& dir, std::size_t n = 2000, std::size_t d = 16) {
    std::mt19937_64 rng(seed());
    const std::string input = dir.path("points.fvecs");
    write_vectors(input, random_points(n, d, rng));
    return input;
}

// A PID no process can have: above the kernel's pid_max.
pid_t dead_pid() {
    std::ifstream in("/proc/sys/kernel/pid_max");
    long long pid_max = 0;
    in >> pid_max;
    REQUIRE(pid_max > 0);
    REQUIRE(pid_max < INT_MAX);
    return static_cast<pid_t>(pid_max + 1);
}

// `path`'s temporary name as `writer` would have made it.
std::string temporary_of(const std::string& path, pid_t writer) {
    const std::filesystem::path mine(temporary_name_for(path));
    const std::string name = mine.filename().string();
    const std::string own = ".tmp." + std::to_string(::getpid()) + ".";
    const std::size_t at = name.rfind(own);
    REQUIRE(at != std::string::npos);
    return (mine.parent_path() / (name.substr(0, at) + ".tmp." + std::to_string(writer) + ".12345")).string();
}

}  // namespace

TEST_CASE("a --report that cannot be written leaves the earlier -o and --report files as they were", "[outputs]") {
    ScratchDir dir;
    INFO("seed " << seed());
    const std::string input = sample_input(dir);
    const std::string output = dir.path("out.vlat");
    const std::string report = dir.path("report.json");
    write_file(output, kPrevious);
    write_file(report, kPrevious);
    // A file-size limit of 3 KiB stands in for a full disk: the .vlat (about 1.5 KB) fits, the report
    // of 30 iterations (about 9 KB) does not. With SIGXFSZ ignored, the write fails with EFBIG, also
    // for root, whom permissions would not stop.
    const CommandResult run = run_command("/bin/sh -c \"trap '' XFSZ; ulimit -f 6; " + cli_command() + " compress " +
                                          quote(input) + " -o " + quote(output) + " --report " + quote(report) +
                                          " -m 4 --iters 30 --cooling 0 --device cpu --threads 2 --quiet\"");
    INFO(run.output);
    CHECK(run.exit_code == 1);
    CHECK_THAT(run.output, Contains(report) && Contains("write failed"));
    CHECK(read_file(output) == kPrevious);
    CHECK(read_file(report) == kPrevious);
    CHECK(temporaries_in(dir.dir()).empty());
    // The same run without the limit replaces both.
    const CommandResult unlimited =
        run_cli("compress " + quote(input) + " -o " + quote(output) + " --report " + quote(report) +
                " -m 4 --iters 30 --cooling 0 --device cpu --threads 2 --quiet");
    INFO(unlimited.output);
    CHECK(unlimited.exit_code == 0);
    CHECK(read_file(output) != kPrevious);
    CHECK(read_file(report) != kPrevious);
}

TEST_CASE("an output group renames its files only at its commit, and removes them when it ends without one",
          "[outputs]") {
    ScratchDir dir;
    const std::string first = dir.path("first.vlat");
    const std::string second = dir.path("second.json");
    write_file(first, kPrevious);
    SECTION("committed") {
        {
            OutputGroup group;
            AtomicFile a(first);
            a.stream() << "new first";
            a.commit();
            AtomicFile b(second);
            b.stream() << "new second";
            b.commit();
            CHECK(read_file(first) == kPrevious);
            CHECK_FALSE(std::filesystem::exists(second));
            group.commit();
        }
        CHECK(read_file(first) == "new first");
        CHECK(read_file(second) == "new second");
    }
    SECTION("failed after the first file was written") {
        {
            OutputGroup group;
            AtomicFile a(first);
            a.stream() << "new first";
            a.commit();
            AtomicFile b(second);
            b.stream() << "new second";
            // What a disk that filled up does to the write.
            b.stream().setstate(std::ios::badbit);
            CHECK_THROWS_WITH(b.commit(), Contains(second) && Contains("write failed"));
        }
        CHECK(read_file(first) == kPrevious);
        CHECK_FALSE(std::filesystem::exists(second));
    }
    SECTION("a target that became a directory is found before anything is renamed") {
        {
            OutputGroup group;
            AtomicFile a(first);
            a.stream() << "new first";
            a.commit();
            AtomicFile b(second);
            b.stream() << "new second";
            b.commit();
            std::filesystem::create_directory(second);
            CHECK_THROWS_WITH(group.commit(), Contains(second) && Contains("is a directory"));
        }
        CHECK(read_file(first) == kPrevious);
        CHECK(std::filesystem::is_directory(second));
    }
    SECTION("a group inside another hands its files on") {
        {
            OutputGroup outer;
            {
                OutputGroup inner;
                AtomicFile a(first);
                a.stream() << "new first";
                a.commit();
                inner.commit();
            }
            CHECK(read_file(first) == kPrevious);
            outer.commit();
        }
        CHECK(read_file(first) == "new first");
    }
    SECTION("without a group, commit renames at once, as before") {
        AtomicFile a(first);
        a.stream() << "new first";
        a.commit();
        CHECK(read_file(first) == "new first");
    }
    CHECK(temporaries_in(dir.dir()).empty());
}

TEST_CASE("every output name up to 255 bytes gets a temporary name that fits and names its writer", "[outputs]") {
    ScratchDir dir;
    for (std::size_t length = 1; length <= NAME_MAX; ++length) {
        const std::string path = dir.path(std::string(length, 'n'));
        const std::filesystem::path temporary(temporary_name_for(path));
        INFO("name of " << length << " bytes: " << temporary.filename().string());
        CHECK(temporary.parent_path() == std::filesystem::path(dir.dir()));
        CHECK(temporary.filename().string().size() <= NAME_MAX);
        CHECK(temporary_writer(path, temporary.filename().string()) == std::optional<pid_t>(::getpid()));
    }
    // Two long names that differ only past the cut get different temporary names.
    const std::string a = dir.path(std::string(250, 'n') + "a.npy");
    const std::string b = dir.path(std::string(250, 'n') + "b.npy");
    CHECK_FALSE(temporary_writer(b, std::filesystem::path(temporary_name_for(a)).filename().string()));
    // Nor is another output's temporary taken for one of this output's.
    const std::string out = dir.path("out.vlat");
    CHECK_FALSE(temporary_writer(out, std::filesystem::path(temporary_name_for(out + ".tmp.1")).filename().string()));
    CHECK_FALSE(temporary_writer(out, "out.vlat.tmp.notes"));
    CHECK_FALSE(temporary_writer(out, ".out.vlat.tmp.99999999999.1"));
}

TEST_CASE("compress and decompress write outputs whose names are 255 bytes long", "[outputs]") {
    ScratchDir dir;
    INFO("seed " << seed());
    const std::string input = sample_input(dir, 300, 8);
    const std::string vlat = dir.path(std::string(NAME_MAX - 5, 'v') + ".vlat");
    const std::string npy = dir.path(std::string(NAME_MAX - 4, 'd') + ".npy");
    const CommandResult compressed =
        run_cli("compress " + quote(input) + " -o " + quote(vlat) + " -m 4 --iters 5 --device cpu --threads 2 --quiet");
    INFO(compressed.output);
    REQUIRE(compressed.exit_code == 0);
    const CommandResult decompressed =
        run_cli("decompress " + quote(vlat) + " -o " + quote(npy) + " --device cpu --quiet");
    INFO(decompressed.output);
    REQUIRE(decompressed.exit_code == 0);
    CHECK(read_vectors(npy).rows == 300);
    CHECK(temporaries_in(dir.dir()).empty());
}

TEST_CASE("a run removes the temporaries that killed runs left for its outputs, and says so", "[outputs]") {
    ScratchDir dir;
    INFO("seed " << seed());
    const std::string input = sample_input(dir, 300, 8);
    const std::string output = dir.path("out.vlat");
    const std::string report = dir.path(std::string(240, 'r') + ".json");
    const pid_t dead = dead_pid();
    const std::string stale = temporary_of(output, dead);
    const std::string stale_report = temporary_of(report, dead);
    const std::string earlier_version = output + ".tmp." + std::to_string(dead) + ".777";
    // This test's own process runs: its temporary may be a live writer's and stays.
    const std::string live = temporary_of(output, ::getpid());
    const std::string unrelated = output + ".tmp.notes";
    for (const std::string& path : {stale, stale_report, earlier_version, live, unrelated}) {
        write_file(path, "partial output");
    }
    const CommandResult run = run_cli("compress " + quote(input) + " -o " + quote(output) + " --report " +
                                      quote(report) + " -m 4 --iters 5 --device cpu --threads 2");
    INFO(run.output);
    CHECK(run.exit_code == 0);
    for (const std::string& path : {stale, stale_report, earlier_version}) {
        CHECK_FALSE(std::filesystem::exists(path));
        CHECK_THAT(run.output, Contains("note: removed " + path + " (14 bytes)") &&
                                   Contains("left by process " + std::to_string(dead) + ", which no longer runs"));
    }
    CHECK(std::filesystem::exists(live));
    CHECK(std::filesystem::exists(unrelated));
    CHECK_THAT(run.output, !Contains(live) && !Contains(unrelated));

    // decompress, too, for its output; --quiet removes without a word.
    const std::string npy = dir.path("out.npy");
    const std::string stale_npy = temporary_of(npy, dead);
    write_file(stale_npy, "partial output");
    const CommandResult quiet = run_cli("decompress " + quote(output) + " -o " + quote(npy) + " --device cpu --quiet");
    INFO(quiet.output);
    CHECK(quiet.exit_code == 0);
    CHECK_FALSE(std::filesystem::exists(stale_npy));
    CHECK(quiet.output.empty());
}
