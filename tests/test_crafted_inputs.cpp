// Commands given files whose checksums and syntax are valid but whose contents are hostile: JSON
// nested 50,000 levels deep, anchors and residual ranges that decode to NaN or Inf, and control
// characters meant to forge lines on the terminal. Each must end in a clear error and a non-zero
// exit, or in escaped output; never a crash or a result of NaN.
#include "support.hpp"

#include "vlattice/format.hpp"
#include "vlattice/io.hpp"
#include "vlattice/pipeline.hpp"
#include "vlattice/results_file.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstring>
#include <limits>

using Catch::Contains;
using namespace vlattice;
using namespace vlattice::test;

namespace {

const std::string kPrecious = "an existing file that a failed run must not touch\n";

std::string nested_json(std::size_t levels) {
    return "{\"x\":" + std::string(levels - 1, '[') + "1" + std::string(levels - 1, ']') + "}";
}

template <typename T>
std::string bytes_of(T value) {
    std::string bytes(sizeof value, '\0');
    std::memcpy(bytes.data(), &value, sizeof value);
    return bytes;
}

// A small valid .vlat with residual codes of widths 8, 4, 2 and 0, and queries of its dimension.
struct Files {
    ScratchDir dir;
    std::string vlat = dir.path("good.vlat");
    std::string queries = dir.path("queries.fvecs");
    std::string bytes;
    std::vector<VlatSection> sections;

    explicit Files(AnchorStorage storage, const std::string& metadata = "{}") {
        std::mt19937_64 rng(seed());
        const Matrix points = random_points(200, 4, rng);
        VlatFile file;
        file.n = points.rows;
        file.d = 4;
        file.anchor_storage = storage;
        file.anchors = anchors_near(points, 8, rng);
        file.assignments.resize(file.n);
        for (std::size_t i = 0; i < file.n; ++i) {
            file.assignments[i] = static_cast<std::uint32_t>(i % 8);
        }
        file.metadata_json = metadata;
        add_residual_codes(file, points, {8, 4, 2, 0});
        write_vlat(vlat, file);
        bytes = read_file(vlat);
        sections = read_vlat(vlat).sections;
        write_vectors(queries, random_points(5, 4, rng));
    }

    // The file with `bytes` written at `at` in section `index`'s payload, checksum recomputed.
    std::string patched(std::size_t index, std::size_t at, const std::string& patch) const {
        const VlatSection& section = sections[index];
        std::string payload = bytes.substr(section.offset, section.length);
        payload.replace(at, patch.size(), patch);
        const std::string path = dir.path("crafted.vlat");
        write_file(path, with_payload(bytes, section, payload));
        return path;
    }
};

void check_refused(const CommandResult& result, const std::string& message) {
    INFO(result.output);
    CHECK(result.exit_code == 1);
    CHECK_THAT(result.output, Contains("error: ") && Contains("crafted.vlat: " + message));
}

}  // namespace

TEST_CASE("info refuses META nested 50,000 levels deep instead of crashing", "[cli][crafted]") {
    ScratchDir dir;
    VlatFile file;
    file.n = 3;
    file.d = 2;
    file.anchors = Matrix(1, 2);
    file.assignments = {0, 0, 0};
    file.metadata_json = nested_json(50000);
    const std::string path = dir.path("crafted.vlat");
    write_vlat(path, file);
    for (const char* json : {"", "--json "}) {
        const CommandResult info = run_cli(std::string("info ") + json + quote(path));
        check_refused(info, "section META nests deeper than 64 levels");
    }
    // The limit is on nesting, not on the metadata vlattice writes.
    file.metadata_json = nested_json(64);
    write_vlat(path, file);
    CHECK(run_cli("info " + quote(path)).exit_code == 0);
}

TEST_CASE("info, decompress and query refuse a .vlat whose values are not finite", "[cli][crafted]") {
    AnchorStorage storage = AnchorStorage::f32;
    std::size_t section = 0;
    std::size_t at = 0;
    std::string patch;
    std::string message;
    SECTION("a float32 NaN anchor") {
        at = (1 * 4 + 2) * 4;
        patch = bytes_of(std::numeric_limits<float>::quiet_NaN());
        message = "section ANCH: anchor 1, dimension 2 is nan";
    }
    SECTION("a float16 Inf anchor") {
        storage = AnchorStorage::f16;
        at = (7 * 4 + 3) * 2;
        patch = bytes_of(std::uint16_t{0xfc00});
        message = "section ANCH: anchor 7, dimension 3 is -inf";
    }
    SECTION("a step of 3e38 on the 8-bit dimension") {
        // RESI: 4 widths, 8 x 4 offsets, then the steps; anchor 5's dimension 0.
        section = 2;
        at = 4 + 8 * 4 * 4 + (5 * 4 + 0) * 4;
        patch = bytes_of(3e38f);
        message = "section RESI: anchor 5, dimension 0";
    }
    const Files files(storage);
    const std::string crafted = files.patched(section, at, patch);
    const std::string out = files.dir.path("existing.fvecs");
    write_file(out, kPrecious);
    check_refused(run_cli("info " + quote(crafted)), message);
    check_refused(run_cli("info --json " + quote(crafted)), message);
    check_refused(run_cli("decompress " + quote(crafted) + " -o " + quote(out)), message);
    CHECK(read_file(out) == kPrecious);
    check_refused(
        run_cli("query " + quote(crafted) + " --queries " + quote(files.queries) + " --k 3 --device cpu --json"),
        message);
}

TEST_CASE("info escapes control characters from the file in its text output", "[cli][crafted]") {
    const std::string forged = "in\x1b[2J.npy\nforged line\r\x07";
    const nlohmann::json metadata = {{"input", {{"path", forged}}}, {"key\nx\x1b", "C1 \xc2\x9b" "31m"}};
    const Files files(AnchorStorage::f32, metadata.dump());
    const CommandResult text = run_cli("info " + quote(files.vlat));
    INFO(text.output);
    REQUIRE(text.exit_code == 0);
    CHECK_THAT(text.output, Contains("in\\x1b[2J.npy\\nforged line\\r\\x07"));
    CHECK_THAT(text.output, Contains("key\\nx\\x1b") && Contains("C1 \\u009b31m"));
    for (const char* raw : {"\x1b", "\x07", "\r", "\nforged", "\nx", "\xc2\x9b"}) {
        CHECK(text.output.find(raw) == std::string::npos);
    }
    // JSON escapes them itself; every byte of it is printable ASCII, and it reads back the same.
    const CommandResult json = run_cli("info --json " + quote(files.vlat));
    REQUIRE(json.exit_code == 0);
    for (const char c : json.output) {
        CHECK((c == '\n' || (c >= 0x20 && c < 0x7f)));
    }
    CHECK(nlohmann::json::parse(json.output)["metadata"] == metadata);
}

TEST_CASE("error messages escape control characters quoted from an input", "[cli][crafted]") {
    ScratchDir dir;
    // A .npy whose header names an unexpected field holding an escape sequence and a newline.
    std::string header = "{'x\x1b[31m\nforged': 1, 'descr': '<f4', 'fortran_order': False, 'shape': (1, 1), }";
    header += std::string(64 - (10 + header.size() + 1) % 64, ' ') + "\n";
    const auto length = static_cast<std::uint16_t>(header.size());
    const std::string npy = std::string("\x93NUMPY\x01\x00", 8) + bytes_of(length) + header + bytes_of(1.0f);
    write_file(dir.path("crafted.npy"), npy);
    const CommandResult result = run_cli("compress " + quote(dir.path("crafted.npy")) + " -o " +
                                         quote(dir.path("out.vlat")) + " -m 1 --device cpu --quiet");
    INFO(result.output);
    CHECK(result.exit_code == 1);
    CHECK_THAT(result.output, Contains("unexpected field 'x\\x1b[31m\\nforged'"));
    CHECK(result.output.find('\x1b') == std::string::npos);
}

TEST_CASE("batch and the results reader refuse JSON nested deeper than 64 levels", "[cli][crafted]") {
    ScratchDir dir;
    const std::string manifest = dir.path("deep.json");
    write_file(manifest, nested_json(50000));
    const CommandResult batch =
        run_cli("batch --manifest " + quote(manifest) + " -o " + quote(dir.path("out")) + " --device cpu --quiet");
    INFO(batch.output);
    CHECK(batch.exit_code == 2);
    CHECK_THAT(batch.output, Contains("--manifest " + manifest + " nests deeper than 64 levels"));

    const std::string results = dir.path("deep.results.h5");
    run_python("import h5py\n"
               "with h5py.File('" + results + "', 'w') as f:\n"
               "    f.attrs['metrics'] = '{\"x\":' + '[' * 49999 + '1' + ']' * 49999 + '}'\n");
    CHECK_THROWS_WITH(read_results_metrics(results),
                      Contains(results + ": attribute 'metrics' nests deeper than 64 levels"));
}
