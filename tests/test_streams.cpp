// Standard input and output as files (-), with the format named by --input-format and
// --output-format, and .fbin as an output format.
#include "support.hpp"

#include "vlattice/io.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <sstream>

using namespace vlattice;
using namespace vlattice::test;
using Catch::Contains;

namespace {

struct Compressed {
    ScratchDir dir;
    Matrix points;
    std::string npy = dir.path("points.npy");
    std::string vlat = dir.path("points.vlat");
    explicit Compressed(std::size_t n = 2000) {
        std::mt19937_64 rng(seed());
        points = random_points(n, 16, rng);
        write_vectors(npy, points);
        const CommandResult run = run_cli("compress " + quote(npy) + " -o " + quote(vlat) +
                                          " -m 8 --iters 5 --device cpu --threads 2 --quiet");
        INFO(run.output);
        REQUIRE(run.exit_code == 0);
    }
    // The reconstruction decompress writes to a file.
    Matrix decompressed() const {
        const std::string out = dir.path("reference-decompressed.npy");
        const CommandResult run = run_cli("decompress " + quote(vlat) + " -o " + quote(out) + " --device cpu --quiet");
        INFO(run.output);
        REQUIRE(run.exit_code == 0);
        return read_vectors(out);
    }
};

void require_same(const Matrix& a, const Matrix& b) {
    REQUIRE(a.rows == b.rows);
    REQUIRE(a.cols == b.cols);
    CHECK(a.data == b.data);
}

}  // namespace

TEST_CASE("compress - reads standard input in the format --input-format names", "[streams]") {
    Compressed sample;
    INFO("seed " << seed());
    const Matrix expected = sample.decompressed();
    const std::string fvecs = sample.dir.path("points.fvecs");
    write_vectors(fvecs, sample.points);
    const std::string piped = sample.dir.path("piped.vlat");
    const std::string out = sample.dir.path("piped.npy");
    for (const auto& [file, format] : {std::pair<std::string, std::string>{sample.npy, "npy"}, {fvecs, "FVECS"}}) {
        INFO(format);
        // Through a pipe, which the readers cannot seek in, and redirected from the file.
        for (const std::string& feed : {"cat " + quote(file) + " | ", std::string()}) {
            const std::string redirect = feed.empty() ? " < " + quote(file) : "";
            const CommandResult run = run_command(feed + cli_command() + " compress - -o " + quote(piped) +
                                                  " --input-format " + format +
                                                  " -m 8 --iters 5 --device cpu --threads 2 --quiet" + redirect);
            INFO(run.output);
            REQUIRE(run.exit_code == 0);
            const CommandResult back =
                run_cli("decompress " + quote(piped) + " -o " + quote(out) + " --device cpu --quiet");
            REQUIRE(back.exit_code == 0);
            require_same(read_vectors(out), expected);
        }
    }
    const CommandResult info = run_cli("info " + quote(piped));
    CHECK_THAT(info.output, Contains("stdin"));

    const CommandResult unnamed = run_command("cat " + quote(sample.npy) + " | " + cli_command() + " compress - -o " +
                                              quote(piped) + " --device cpu");
    CHECK(unnamed.exit_code == 2);
    CHECK_THAT(unnamed.output, Contains("INPUT -: standard input has no extension") && Contains("--input-format"));
    const CommandResult unknown = run_cli("compress " + quote(sample.npy) + " --input-format npz -o " + quote(piped));
    CHECK(unknown.exit_code == 2);
    CHECK_THAT(unknown.output,
               Contains("unknown format 'npz'") && Contains("fvecs bvecs ivecs fbin u8bin i8bin npy h5 hdf5"));
    const CommandResult empty = run_command(cli_command() + " compress - --input-format npy -o " + quote(piped) +
                                            " --device cpu < /dev/null");
    CHECK(empty.exit_code == 1);
    CHECK_THAT(empty.output, Contains("/dev/stdin: empty file"));
    // -o is never standard output for compress: it would be a file named "-".
    const CommandResult dash = run_cli("compress " + quote(sample.npy) + " -o - --device cpu");
    CHECK(dash.exit_code == 2);
    CHECK_THAT(dash.output, Contains("-o -: this output cannot go to standard output"));
    CHECK_FALSE(std::filesystem::exists("-"));
}

TEST_CASE("compress - reads HDF5 redirected from its file, with its metric, and refuses it through a pipe",
          "[streams]") {
    ScratchDir dir;
    const std::string h5 = dir.path("angular.h5");
    run_python("import h5py, numpy as np\n"
               "with h5py.File('" + h5 + "', 'w') as f:\n"
               "    f['train'] = np.random.default_rng(3).standard_normal((400, 8)).astype(np.float32)\n"
               "    f.attrs['distance'] = 'angular'\n");
    const std::string out = dir.path("out.vlat");
    const CommandResult redirected = run_command(cli_command() + " compress - --input-format h5 -o " + quote(out) +
                                                 " -m 4 --iters 3 --device cpu --threads 2 < " + quote(h5));
    INFO(redirected.output);
    CHECK(redirected.exit_code == 0);
    CHECK_THAT(redirected.output, Contains("400 x 8 (angular)"));
    const CommandResult piped = run_command("cat " + quote(h5) + " | " + cli_command() +
                                            " compress - --input-format hdf5 -o " + quote(dir.path("piped.vlat")) +
                                            " --device cpu");
    INFO(piped.output);
    CHECK(piped.exit_code == 1);
    CHECK_THAT(piped.output, Contains("standard input: HDF5 is read from a file, not from a pipe"));
}

TEST_CASE("decompress -o - writes the vectors to standard output in the format --output-format names", "[streams]") {
    Compressed sample;
    INFO("seed " << seed());
    const Matrix expected = sample.decompressed();
    for (const std::string format : {"npy", "fvecs", "fbin"}) {
        INFO(format);
        const std::string out = sample.dir.path("stdout." + format);
        const std::string messages = sample.dir.path("stderr.txt");
        // In braces: run_command sends the stderr of the whole line to its own capture.
        const CommandResult run = run_command("{ " + cli_command() + " decompress " + quote(sample.vlat) +
                                              " -o - --output-format " + format + " --reference " + quote(sample.npy) +
                                              " --device cpu > " + quote(out) + " 2> " + quote(messages) + "; }");
        INFO(read_file(messages));
        REQUIRE(run.exit_code == 0);
        require_same(read_vectors(out), expected);
        // The messages go to standard error, out of the data's way.
        CHECK_THAT(read_file(messages), Contains("wrote standard output: 2000 x 16") &&
                                            Contains("reconstruction MSE: "));
    }
    const CommandResult unnamed = run_cli("decompress " + quote(sample.vlat) + " -o - --device cpu");
    CHECK(unnamed.exit_code == 2);
    CHECK_THAT(unnamed.output, Contains("-o -: standard output has no extension") && Contains("--output-format"));
    const CommandResult hdf5 = run_cli("decompress " + quote(sample.vlat) + " -o - --output-format hdf5 --device cpu");
    CHECK(hdf5.exit_code == 2);
    CHECK_THAT(hdf5.output, Contains("standard output: HDF5 cannot be written to a stream"));
}

TEST_CASE("decompress -o - that cannot finish writing exits non-zero", "[streams]") {
    Compressed sample(20000);
    // A reader that stops after 10 bytes of the 1.28 MB: the rest meets a closed pipe. By default
    // SIGPIPE ends the run; with it ignored, the write fails and says so.
    const std::string run = cli_command() + " decompress " + quote(sample.vlat) +
                            " -o - --output-format npy --device cpu --quiet; echo status:$? >&2";
    const CommandResult killed = run_command("{ ( " + run + " ) | head -c 10 > /dev/null; }");
    INFO(killed.output);
    CHECK_THAT(killed.output, Contains("status:141"));
    const CommandResult failed = run_command("{ ( trap '' PIPE; " + run + " ) | head -c 10 > /dev/null; }");
    INFO(failed.output);
    CHECK_THAT(failed.output, Contains("standard output: write failed") && Contains("status:1"));
}

TEST_CASE("decompress writes .fbin, which reads back as the same vectors", "[streams]") {
    Compressed sample;
    INFO("seed " << seed());
    const Matrix expected = sample.decompressed();
    const std::string fbin = sample.dir.path("out.fbin");
    const CommandResult run =
        run_cli("decompress " + quote(sample.vlat) + " -o " + quote(fbin) + " --device cpu --quiet");
    INFO(run.output);
    REQUIRE(run.exit_code == 0);
    require_same(read_vectors(fbin), expected);
    // The big-ann layout: uint32 n, uint32 d, then the float32 rows.
    const std::string bytes = read_file(fbin);
    REQUIRE(bytes.size() == 8 + expected.data.size() * sizeof(float));
    std::uint32_t header[2];
    std::memcpy(header, bytes.data(), sizeof header);
    CHECK(header[0] == 2000);
    CHECK(header[1] == 16);
    // --output-format names it for a file whose extension says nothing.
    const std::string named = sample.dir.path("out.bin");
    REQUIRE(run_cli("decompress " + quote(sample.vlat) + " -o " + quote(named) + " --output-format fbin --device cpu")
                .exit_code == 0);
    CHECK(read_file(named) == bytes);
    ReadOptions as_fbin;
    as_fbin.format = "fbin";
    require_same(read_vectors(named, as_fbin), expected);
}

TEST_CASE("write_vectors writes every streamable format to a stream as it writes it to a file", "[streams]") {
    ScratchDir dir;
    std::mt19937_64 rng(seed());
    const Matrix points = random_points(50, 7, rng);
    for (const std::string format : {"npy", "fvecs", "fbin"}) {
        INFO(format);
        const std::string file = dir.path("points." + format);
        write_vectors(file, points);
        std::ostringstream stream;
        write_vectors(stream, "a stream", points, format);
        CHECK(stream.str() == read_file(file));
        require_same(read_vectors(file), points);
    }
    std::ostringstream stream;
    CHECK_THROWS_WITH(write_vectors(stream, "a stream", points, "h5"),
                      Contains("a stream: HDF5 cannot be written to a stream"));
    stream.setstate(std::ios::badbit);
    CHECK_THROWS_WITH(write_vectors(stream, "a stream", points, "npy"), Contains("a stream: write failed"));
}
