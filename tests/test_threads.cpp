// CPU thread counts: never more than the cores, and never more than an address-space limit leaves
// room for, where OpenBLAS would otherwise retry its buffer allocation forever.
#include "support.hpp"

#include "vlattice/cpu_backend.hpp"
#include "vlattice/io.hpp"

#include <catch2/catch.hpp>
#include <omp.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

using namespace vlattice;
using namespace vlattice::test;
using Catch::Contains;

namespace {

// This process's mapped address space (VmSize), in bytes.
std::uint64_t mapped_bytes() {
    std::ifstream status("/proc/self/status");
    std::string key;
    while (status >> key) {
        if (key == "VmSize:") {
            std::uint64_t kib = 0;
            status >> kib;
            return kib << 10;
        }
    }
    return 0;
}

}  // namespace

TEST_CASE("compress --threads 32 under ulimit -v 4 GiB ends, with fewer threads and a note", "[threads]") {
    ScratchDir dir;
    INFO("seed " << seed());
    std::mt19937_64 rng(seed());
    const std::string input = dir.path("points.npy");
    write_vectors(input, random_points(2000, 16, rng));
    // Before, OpenBLAS mapped a 128 MiB buffer for each of the 32 threads, found no room under the
    // limit and retried forever; `timeout` turns such a hang into exit 124.
    const CommandResult run = run_command("/bin/sh -c 'ulimit -v 4194304; exec timeout 60 " + cli_command() +
                                          " compress " + quote(input) + " -o " + quote(dir.path("out.vlat")) +
                                          " -m 8 --iters 5 --device cpu --threads 32'");
    INFO(run.output);
    CHECK(run.exit_code == 0);
    CHECK_THAT(run.output, Contains("note: --threads 32") && Contains("; using "));
    CHECK(std::filesystem::file_size(dir.path("out.vlat")) > 0);
}

TEST_CASE("the threads planned are at most the cores, and at most what the address-space limit has room for",
          "[threads]") {
    const int cores = omp_get_num_procs();
    const CpuThreads many = plan_cpu_threads(cores + 5);
    CHECK(many.threads == cores);
    CHECK_THAT(many.note, Contains("--threads " + std::to_string(cores + 5)) &&
                              Contains("more than the " + std::to_string(cores) + " cores"));
    const CpuThreads few = plan_cpu_threads(1);
    CHECK(few.threads == 1);
    CHECK(few.note.empty());

    // In a child, under a limit 100 MiB above what it has mapped: room for the malloc arena and the
    // stack of one thread (72 MiB), not of two (OpenBLAS's buffers for as many threads as cores were
    // mapped when it was loaded).
    REQUIRE(cores >= 2);
    int pipe_ends[2];
    REQUIRE(::pipe(pipe_ends) == 0);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        ::close(pipe_ends[0]);
        const rlim_t limit = mapped_bytes() + (rlim_t{100} << 20);
        const struct rlimit tight {limit, limit};
        std::string reply = "setrlimit failed";
        if (::setrlimit(RLIMIT_AS, &tight) == 0) {
            const CpuThreads planned = plan_cpu_threads(2);
            reply = std::to_string(planned.threads) + "|" + planned.note;
        }
        const ssize_t written = ::write(pipe_ends[1], reply.data(), reply.size());
        ::_exit(written == static_cast<ssize_t>(reply.size()) ? 0 : 1);
    }
    ::close(pipe_ends[1]);
    std::string reply;
    char buffer[512];
    for (ssize_t got; (got = ::read(pipe_ends[0], buffer, sizeof buffer)) > 0;) {
        reply.append(buffer, static_cast<std::size_t>(got));
    }
    ::close(pipe_ends[0]);
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    INFO(reply);
    CHECK(WIFEXITED(status));
    CHECK_THAT(reply, Catch::StartsWith("1|--threads 2: the address-space limit (ulimit -v, ") &&
                          Contains("leaves room for 1 thread, not 2; using 1"));
}
