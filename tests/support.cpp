#include "support.hpp"

#include <catch2/catch.hpp>
#include <xxhash.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/wait.h>

namespace vlattice::test {

std::uint64_t seed() {
    if (const char* fixed = std::getenv("VLATTICE_TEST_SEED")) {
        return std::strtoull(fixed, nullptr, 10);
    }
    static const std::uint64_t per_run = std::random_device{}();
    return per_run;
}

Matrix random_points(std::size_t n, std::size_t d, std::mt19937_64& rng, std::size_t clusters) {
    std::normal_distribution<float> normal;
    Matrix centres(clusters, d);
    for (float& v : centres.data) {
        v = 4.0f * normal(rng);
    }
    Matrix points(n, d);
    std::uniform_int_distribution<std::size_t> pick(0, clusters - 1);
    for (std::size_t i = 0; i < n; ++i) {
        const float* c = centres.row(pick(rng));
        for (std::size_t k = 0; k < d; ++k) {
            points.row(i)[k] = c[k] + normal(rng);
        }
    }
    return points;
}

Matrix duplicated_points(std::size_t n, std::size_t d, std::mt19937_64& rng) {
    Matrix x = random_points(n, d, rng, 5);
    for (std::size_t i = 3; i < x.rows; i += 3) {
        std::memcpy(x.row(i), x.row(i / 3), x.cols * sizeof(float));
    }
    return x;
}

Matrix anchors_near(const Matrix& x, std::size_t m, std::mt19937_64& rng) {
    Matrix c(m, x.cols);
    std::uniform_int_distribution<std::size_t> pick(0, x.rows - 1);
    std::normal_distribution<float> noise(0.0f, 0.5f);
    for (std::size_t j = 0; j < m; ++j) {
        const float* source = (j > 2 && j % 5 == 0) ? c.row(j - 1) : x.row(pick(rng));
        for (std::size_t k = 0; k < x.cols; ++k) {
            c.row(j)[k] = source[k] + (j % 5 == 0 ? 0.0f : noise(rng));
        }
    }
    return c;
}

NearTie near_tie(std::mt19937_64& rng) {
    constexpr std::size_t n = 513;
    constexpr std::size_t d = 19;
    std::uniform_real_distribution<float> jitter(-1e-3f, 1e-3f);
    NearTie tie{Matrix(n, d), Matrix(3, d)};
    std::fill(tie.anchors.data.begin(), tie.anchors.data.end(), 1000.0f);
    tie.anchors.row(1)[0] = 1000.5f;
    tie.anchors.row(2)[0] = 1000.5f;
    for (std::size_t i = 0; i < n; ++i) {
        for (std::size_t k = 0; k < d; ++k) {
            tie.points.row(i)[k] = 1000.0f + (k == 0 ? 0.25f : 0.0f) + jitter(rng);
        }
    }
    return tie;
}

ScratchDir::ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "vlattice-test-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) {
        FAIL("cannot create a scratch folder");
    }
    dir_ = pattern;
}

ScratchDir::~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
}

std::string quote(const std::string& path) {
    return "'" + path + "'";
}

CommandResult run_command(const std::string& command_line) {
    CommandResult result;
    FILE* pipe = ::popen((command_line + " 2>&1").c_str(), "r");
    REQUIRE(pipe != nullptr);
    std::array<char, 4096> buffer{};
    std::size_t got = 0;
    while ((got = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) {
        result.output.append(buffer.data(), got);
    }
    const int status = ::pclose(pipe);
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return result;
}

std::string cli_command() {
    // The GPU machine runs a bundled copy of the CLI from another path (scripts/gpu-check).
    const char* moved = std::getenv("VLATTICE_CLI");
    return std::string("'") + (moved ? moved : VLATTICE_CLI) + "'";
}

CommandResult run_cli(const std::string& arguments) {
    return run_command(cli_command() + " " + arguments);
}

void run_python(const std::string& script) {
    ScratchDir dir;
    write_file(dir.path("script.py"), script);
    const CommandResult result = run_command("/usr/bin/python3 '" + dir.path("script.py") + "'");
    INFO(result.output);
    REQUIRE(result.exit_code == 0);
}

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    REQUIRE(in.good());
    std::ostringstream bytes;
    bytes << in.rdbuf();
    return bytes.str();
}

void write_file(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << bytes;
    REQUIRE(out.good());
}

std::string with_payload(std::string bytes, const VlatSection& section, const std::string& payload) {
    REQUIRE(payload.size() == section.length);
    static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the checksum is stored with memcpy");
    const std::uint64_t checksum = XXH3_64bits(payload.data(), payload.size());
    bytes.replace(section.offset, payload.size(), payload);
    bytes.replace(section.offset + section.length, sizeof checksum,
                  std::string(reinterpret_cast<const char*>(&checksum), sizeof checksum));
    return bytes;
}

}  // namespace vlattice::test
