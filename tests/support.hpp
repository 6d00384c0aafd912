// Helpers shared by the tests: seeds, random data, scratch folders, running the CLI and Debian's
// python3 (numpy, h5py) as a real outside client.
#pragma once

#include "vlattice/format.hpp"
#include "vlattice/types.hpp"

#include <cstdint>
#include <random>
#include <string>

namespace vlattice::test {

// A fresh seed per run, or VLATTICE_TEST_SEED when set. Tests print it with INFO so a failure can
// be replayed.
std::uint64_t seed();

// Gaussian mixture: `clusters` centres with spread 4, unit noise around them.
Matrix random_points(std::size_t n, std::size_t d, std::mt19937_64& rng, std::size_t clusters = 8);

// random_points with 5 clusters where every third row copies an earlier row: exact duplicates.
Matrix duplicated_points(std::size_t n, std::size_t d, std::mt19937_64& rng);

// Anchors near randomly chosen points; every fifth one (from the sixth on) an exact copy of the one
// before it, so that exact ties in distance occur.
Matrix anchors_near(const Matrix& x, std::size_t m, std::mt19937_64& rng);

// 513 points of 19 dimensions on the perpendicular bisector of two anchors far from the origin,
// where float32 distances lose the difference; anchor 2 is an exact copy of anchor 1, so some
// double distances tie exactly and must go to the lower index.
struct NearTie {
    Matrix points;
    Matrix anchors;
};
NearTie near_tie(std::mt19937_64& rng);

// A new empty folder under the system temp folder, removed with everything in it on destruction.
class ScratchDir {
public:
    ScratchDir();
    ~ScratchDir();
    ScratchDir(const ScratchDir&) = delete;
    ScratchDir& operator=(const ScratchDir&) = delete;
    std::string path(const std::string& name) const { return dir_ + "/" + name; }
    const std::string& dir() const { return dir_; }

private:
    std::string dir_;
};

// A path in single quotes, for command lines run through the shell.
std::string quote(const std::string& path);

struct CommandResult {
    int exit_code = -1;
    std::string output;  // stdout and stderr together
};

// Runs a shell command line, capturing stdout and stderr.
CommandResult run_command(const std::string& command_line);
// The built vlattice CLI (or $VLATTICE_CLI), quoted for the shell.
std::string cli_command();
// Runs cli_command() with these arguments (a shell-quoted string).
CommandResult run_cli(const std::string& arguments);
// Runs Debian's /usr/bin/python3 on a script; fails the test with the output if it exits non-zero.
void run_python(const std::string& script);

std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& bytes);

// A .vlat file's bytes with one section's payload replaced (same length) and its checksum
// recomputed, so that a reader gets past the checksum to the checks behind it.
std::string with_payload(std::string bytes, const VlatSection& section, const std::string& payload);

}  // namespace vlattice::test
