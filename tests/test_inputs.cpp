// Input files as users bring them (HDF5 files with links, numpy's default dtypes, named pipes, files
// too large for the machine): each is read correctly or refused at once, naming the file and the spot.
#include "support.hpp"

#include "vlattice/format.hpp"
#include "vlattice/io.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <string>

using namespace vlattice;
using namespace vlattice::test;
using Catch::Contains;

namespace {

// Runs the CLI under timeout(1), so that a command that waits forever fails the test instead of
// hanging it: exit 124 then.
CommandResult run_cli_briefly(const std::string& arguments) {
    return run_command("timeout 20 " + cli_command() + " " + arguments);
}

void make_fifo(const std::string& path) {
    REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
}

}  // namespace

TEST_CASE("an HDF5 external link to a dataset in another file reads that dataset", "[inputs][hdf5]") {
    ScratchDir dir;
    std::filesystem::create_directory(dir.path("data"));
    // The link names its file relative to the linking file's folder, as h5py users write them.
    run_python("import h5py, numpy as np\n"
               "x = np.arange(500 * 8, dtype='<f4').reshape(500, 8)\n"
               "with h5py.File(" + quote(dir.path("data/vectors.h5")) + ", 'w') as f:\n"
               "    f['train'] = x\n"
               "with h5py.File(" + quote(dir.path("data/link.h5")) + ", 'w') as f:\n"
               "    f['train'] = h5py.ExternalLink('vectors.h5', '/train')\n");
    const Matrix linked = read_vectors(dir.path("data/link.h5"));
    REQUIRE(linked.rows == 500);
    REQUIRE(linked.cols == 8);
    CHECK(linked.row(499)[7] == 500.0f * 8.0f - 1.0f);

    const CommandResult run = run_cli("compress " + quote(dir.path("data/link.h5")) + " -o " +
                                      quote(dir.path("out.vlat")) + " -m 4 --iters 3 --device cpu --quiet");
    INFO(run.output);
    CHECK(run.exit_code == 0);

    // A linked file cut short is named as the file that holds the data.
    const std::string whole = read_file(dir.path("data/vectors.h5"));
    write_file(dir.path("data/vectors.h5"), whole.substr(0, whole.size() - 4000));
    CHECK_THROWS_WITH(read_vectors(dir.path("data/link.h5")), Contains("link.h5") && Contains("vectors.h5"));
}

TEST_CASE("an HDF5 external link to a named pipe is refused at once", "[inputs][hdf5]") {
    ScratchDir dir;
    run_python("import h5py\n"
               "with h5py.File(" + quote(dir.path("link.h5")) + ", 'w') as f:\n"
               "    f['train'] = h5py.ExternalLink('pipe.h5', '/train')\n"
               "    f['test'] = h5py.ExternalLink('pipe.h5', '/test')\n");
    make_fifo(dir.path("pipe.h5"));
    const CommandResult compress = run_cli_briefly("compress " + quote(dir.path("link.h5")) + " -o " +
                                                   quote(dir.path("out.vlat")) + " --device cpu --quiet");
    INFO(compress.output);
    CHECK(compress.exit_code == 1);
    CHECK_THAT(compress.output, Contains("link.h5: the external link to pipe.h5:/train") &&
                                    Contains("pipe.h5: not a regular file"));
    CHECK_FALSE(std::filesystem::exists(dir.path("out.vlat")));
}

TEST_CASE("an HDF5 dataset kept in external raw files is refused, naming it", "[inputs][hdf5]") {
    ScratchDir dir;
    run_python("import h5py, numpy as np\n"
               "with h5py.File(" + quote(dir.path("x.h5")) + ", 'w') as f:\n"
               "    d = f.create_dataset('train', (100, 4), dtype='<f4', external=[(" +
               quote(dir.path("raw.bin")) + ", 0, 1600)])\n"
               "    d[:] = np.ones((100, 4), dtype='<f4')\n");
    CHECK_THROWS_WITH(read_vectors(dir.path("x.h5")),
                      Contains("x.h5: dataset 'train' keeps its data in external raw files"));
}

TEST_CASE("float64 .npy (numpy's default) and HDF5 are read as float32, several blocks included", "[inputs]") {
    ScratchDir dir;
    // 300,000 x 4 float64 is more than one 8 MiB read block; the HDF5 copy is chunked and compressed.
    run_python("import h5py, numpy as np\n"
               "x = np.random.default_rng(7).normal(size=(300000, 4)) * 1e12\n"
               "np.save(" + quote(dir.path("x.npy")) + ", x)\n"
               "with h5py.File(" + quote(dir.path("x.h5")) + ", 'w') as f:\n"
               "    f.create_dataset('train', data=x, chunks=(1000, 4), compression='gzip')\n"
               "x.astype('<f4').tofile(" + quote(dir.path("expected.raw")) + ")\n");
    const std::string expected = read_file(dir.path("expected.raw"));
    for (const std::string name : {"x.npy", "x.h5"}) {
        INFO(name);
        const Matrix points = read_vectors(dir.path(name));
        REQUIRE(points.rows == 300000);
        REQUIRE(points.cols == 4);
        CHECK(std::string(reinterpret_cast<const char*>(points.data.data()), points.data.size() * sizeof(float)) ==
              expected);
    }
    const CommandResult run = run_cli("compress " + quote(dir.path("x.npy")) + " -o " + quote(dir.path("x.vlat")) +
                                      " -m 4 --iters 2 --device cpu --quiet");
    INFO(run.output);
    CHECK(run.exit_code == 0);
}

TEST_CASE("a float64 value beyond float32's range is named by row and column, not called Inf", "[inputs]") {
    ScratchDir dir;
    run_python("import h5py, numpy as np\n"
               "x = np.ones((600, 6))\n"
               "x[417, 5] = -1e300\n"
               "np.save(" + quote(dir.path("x.npy")) + ", x)\n"
               "with h5py.File(" + quote(dir.path("x.h5")) + ", 'w') as f:\n"
               "    f.create_dataset('train', data=x, chunks=(64, 3), compression='gzip')\n"
               "x[417, 5] = np.inf\n"
               "np.save(" + quote(dir.path("inf.npy")) + ", x)\n");
    const std::string beyond = "row 417 (0-based), column 5 (0-based) holds -1e+300, beyond float32's range";
    CHECK_THROWS_WITH(read_vectors(dir.path("x.npy")), Contains(dir.path("x.npy") + ": " + beyond));
    CHECK_THROWS_WITH(read_vectors(dir.path("x.h5")), Contains(dir.path("x.h5") + ": dataset 'train': " + beyond));
    const CommandResult run = run_cli("compress " + quote(dir.path("x.h5")) + " -o " + quote(dir.path("x.vlat")) +
                                      " --device cpu --quiet");
    INFO(run.output);
    CHECK(run.exit_code == 1);
    CHECK_THAT(run.output, Contains(beyond) && !Contains("Inf"));
    // An Inf the file really holds is still called one.
    const Matrix inf = read_vectors(dir.path("inf.npy"));
    CHECK_THROWS_WITH(check_finite(inf, "inf.npy"), Contains("row 417 (0-based), column 5 (0-based) is Inf"));
}

TEST_CASE(".i8bin and int8 .npy are read as vectors", "[inputs]") {
    ScratchDir dir;
    run_python("import numpy as np\n"
               "x = np.arange(-128, 128, dtype=np.int8).reshape(32, 8)\n"
               "with open(" + quote(dir.path("x.i8bin")) + ", 'wb') as f:\n"
               "    np.array(x.shape, dtype='<u4').tofile(f)\n"
               "    x.tofile(f)\n"
               "np.save(" + quote(dir.path("x.npy")) + ", x)\n");
    for (const std::string name : {"x.i8bin", "x.npy"}) {
        INFO(name);
        const Matrix points = read_vectors(dir.path(name));
        REQUIRE(points.rows == 32);
        REQUIRE(points.cols == 8);
        for (std::size_t i = 0; i < points.data.size(); ++i) {
            REQUIRE(points.data[i] == static_cast<float>(static_cast<int>(i) - 128));
        }
    }
    write_file(dir.path("short.i8bin"), read_file(dir.path("x.i8bin")).substr(0, 100));
    CHECK_THROWS_WITH(read_vectors(dir.path("short.i8bin")), Contains("truncated") && Contains("32 x 8 int8"));
}

namespace {

// 500 x 8 train, 20 queries and their exact 10 nearest neighbours (numpy, brute force) as HDF5
// int32 `neighbors` (also with a row too many and with only 5 ids per query) and as int32 and int64
// .npy; a .vlat with 8-bit residual codes, which finds them.
struct SmallSearch {
    ScratchDir dir;
    std::string data = dir.path("data.h5");
    std::string vlat = dir.path("data.vlat");
    SmallSearch() {
        run_python("import h5py, numpy as np\n"
                   "rng = np.random.default_rng(5)\n"
                   "x = rng.normal(size=(500, 8)).astype('<f4')\n"
                   "q = rng.normal(size=(20, 8)).astype('<f4')\n"
                   "d = ((q[:, None, :].astype('<f8') - x[None, :, :]) ** 2).sum(axis=2)\n"
                   "ids = np.argsort(d, axis=1, kind='stable')[:, :10]\n"
                   "with h5py.File(" + quote(data) + ", 'w') as f:\n"
                   "    f['train'] = x\n"
                   "    f['test'] = q\n"
                   "    f['neighbors'] = ids.astype('<i4')\n"
                   "    f['neighbors_21_rows'] = np.vstack([ids, ids[:1]]).astype('<i4')\n"
                   "    f['neighbors_5_ids'] = ids[:, :5].astype('<i4')\n"
                   "np.save(" + quote(dir.path("gt32.npy")) + ", ids.astype(np.int32))\n"
                   "np.save(" + quote(dir.path("gt64.npy")) + ", ids.astype(np.int64))\n"
                   "np.save(" + quote(dir.path("gt-complex.npy")) + ", ids.astype(np.complex64))\n");
        const CommandResult made = run_cli("compress " + quote(data) + " -o " + quote(vlat) +
                                           " -m 16 --iters 5 --bits 8 --device cpu --quiet");
        INFO(made.output);
        REQUIRE(made.exit_code == 0);
    }
    CommandResult query(const std::string& options) const {
        return run_cli("query " + quote(vlat) + " --queries " + quote(data) + " --nprobe all --device cpu " + options);
    }
    nlohmann::json query_json(const std::string& options) const {
        const CommandResult run = query(options + " --json");
        INFO(run.output);
        REQUIRE(run.exit_code == 0);
        return nlohmann::json::parse(run.output);
    }
};

}  // namespace

TEST_CASE("int32 and int64 .npy ground truths are read as ids, and one that cannot be read fails", "[inputs][query]") {
    const SmallSearch s;
    const nlohmann::json from_hdf5 = s.query_json("--ground-truth " + quote(s.data));
    REQUIRE(from_hdf5["recall"].contains("10-recall@10"));
    CHECK(from_hdf5["recall"]["10-recall@10"].get<double>() >= 0.9);
    for (const std::string name : {"gt32.npy", "gt64.npy"}) {
        INFO(name);
        const nlohmann::json from_npy = s.query_json("--ground-truth " + quote(s.dir.path(name)));
        CHECK(from_npy["recall"] == from_hdf5["recall"]);
    }
    const CommandResult complex = s.query("--ground-truth " + quote(s.dir.path("gt-complex.npy")));
    INFO(complex.output);
    CHECK(complex.exit_code == 1);
    CHECK_THAT(complex.output, Contains("gt-complex.npy: .npy header field 'descr' is '<c8'"));
    const CommandResult as_json = s.query("--json --ground-truth " + quote(s.dir.path("gt-complex.npy")));
    CHECK(as_json.exit_code == 1);
}

TEST_CASE("query refuses a ground truth with another number of rows than queries, naming both", "[inputs][query]") {
    const SmallSearch s;
    const std::string more_rows = quote(s.data + ":neighbors_21_rows");
    const CommandResult more = s.query("--ground-truth " + more_rows);
    INFO(more.output);
    CHECK(more.exit_code == 1);
    CHECK_THAT(more.output, Contains("data.h5:neighbors_21_rows: 21 rows of true neighbours for 20 queries"));
    // --limit keeps the first queries and their rows of a ground truth that matches all of them.
    const nlohmann::json limited = s.query_json("--limit 5 --ground-truth " + quote(s.data));
    CHECK(limited["queries"] == 5);
    CHECK(limited["recall"].contains("10-recall@10"));
    const CommandResult limited_more = s.query("--limit 5 --ground-truth " + more_rows);
    CHECK(limited_more.exit_code == 1);
    CHECK_THAT(limited_more.output, Contains("21 rows of true neighbours for 20 queries"));
}

TEST_CASE("query says which recalls a ground truth with fewer ids than k leaves out", "[inputs][query]") {
    const SmallSearch s;
    const std::string five = quote(s.data + ":neighbors_5_ids");
    const nlohmann::json found = s.query_json("--k 10 --ground-truth " + five);
    CHECK(found["recall"].contains("1-recall@1"));
    CHECK_FALSE(found["recall"].contains("10-recall@10"));
    REQUIRE(found.contains("recall_left_out"));
    CHECK(found["recall_left_out"].value("10-recall@10", "") == "the ground truth has 5 ids per query");
    const CommandResult text = s.query("--k 10 --ground-truth " + five);
    INFO(text.output);
    CHECK(text.exit_code == 0);
    CHECK_THAT(text.output, Contains("note: 10-recall@10 left out: the ground truth has 5 ids per query") &&
                                Contains("1-recall@1"));
}

TEST_CASE("query --k beyond the file's vectors is refused with the range", "[inputs][query]") {
    const SmallSearch s;
    const CommandResult huge = s.query("--k 99999999999");
    INFO(huge.output);
    CHECK(huge.exit_code == 2);
    CHECK_THAT(huge.output,
               Contains("--k must be at most the number of vectors in " + s.vlat + " (500), got 99999999999"));
    CHECK(s.query("--k 500").exit_code == 0);
}

namespace {

// The CLI under an address-space limit (ulimit -v, in KiB), so that memory runs out at the same point
// on every machine. One thread: OpenBLAS and OpenMP then reserve the least.
CommandResult run_cli_within(std::uint64_t kib, const std::string& arguments) {
    return run_command("ulimit -v " + std::to_string(kib) + " && OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 timeout 60 " +
                       cli_command() + " " + arguments);
}

// A gzip-compressed float32 HDF5 dataset of rows x cols zeros, a few MB on disk whatever its size in
// memory: one compressed chunk of chunk_rows rows, written to every chunk position as it is.
void write_zeros_h5(const std::string& path, std::size_t rows, std::size_t cols, std::size_t chunk_rows) {
    run_python("import h5py, zlib\n"
               "rows, cols, chunk_rows = " + std::to_string(rows) + ", " + std::to_string(cols) + ", " +
               std::to_string(chunk_rows) + "\n"
               "chunk = zlib.compress(bytes(chunk_rows * cols * 4), 9)\n"
               "with h5py.File(" + quote(path) + ", 'w') as f:\n"
               "    d = f.create_dataset('train', (rows, cols), dtype='<f4', chunks=(chunk_rows, cols),\n"
               "                         compression='gzip')\n"
               "    for first in range(0, rows, chunk_rows):\n"
               "        d.id.write_direct_chunk((first, 0), chunk)\n");
}

}  // namespace

TEST_CASE("a compressed HDF5 dataset larger than memory is refused naming the file, the dataset and the size",
          "[inputs][memory]") {
    ScratchDir dir;
    write_zeros_h5(dir.path("bomb.h5"), 2000000, 4096, 20000);
    const CommandResult run =
        run_cli_within(8u << 20, "compress " + quote(dir.path("bomb.h5")) + " -o " + quote(dir.path("out.vlat")) +
                                     " --device cpu --threads 1");
    INFO(run.output);
    CHECK(run.exit_code == 1);
    CHECK_THAT(run.output, Contains(dir.path("bomb.h5") + ": dataset 'train': 2,000,000 x 4,096 float32 needs 32.8 GB "
                                    "(32,768,000,000 bytes) of memory, more than the address-space limit (ulimit -v) "
                                    "allows (8.6 GB)"));
    CHECK_FALSE(std::filesystem::exists(dir.path("out.vlat")));
}

TEST_CASE("memory that runs out anyway is reported with the step that needed it", "[inputs][memory]") {
    ScratchDir dir;
    // 512,000 x 1,000 float32 is exactly the 2,048,000,000-byte limit: allowed by the check, and
    // bound to fail, since the program itself already takes some of it.
    write_zeros_h5(dir.path("edge.h5"), 512000, 1000, 32000);
    const CommandResult run = run_cli_within(2000000, "compress " + quote(dir.path("edge.h5")) + " -o " +
                                                          quote(dir.path("out.vlat")) + " --device cpu --threads 1");
    INFO(run.output);
    CHECK(run.exit_code == 1);
    CHECK_THAT(run.output, Contains("vlattice compress: error: ran out of memory while reading INPUT " +
                                    dir.path("edge.h5")));
}

TEST_CASE("decompress of a .vlat standing for more vectors than memory holds names the file and the size",
          "[inputs][memory]") {
    ScratchDir dir;
    // One anchor: the ids take no bits, so 2,000,000 vectors of 4,096 dimensions fit in a small file.
    VlatFile file;
    file.n = 2000000;
    file.d = 4096;
    file.anchors = Matrix(1, 4096);
    file.assignments.assign(file.n, 0);
    file.metadata_json = "{}";
    write_vlat(dir.path("many.vlat"), file);
    const CommandResult run =
        run_cli_within(8u << 20, "decompress " + quote(dir.path("many.vlat")) + " -o " + quote(dir.path("out.npy")) +
                                     " --device cpu");
    INFO(run.output);
    CHECK(run.exit_code == 1);
    CHECK_THAT(run.output, Contains(dir.path("many.vlat") + ": decoding 2,000,000 x 4,096 float32 needs 32.8 GB"));
    CHECK_FALSE(std::filesystem::exists(dir.path("out.npy")));
}

TEST_CASE("query --k whose results would not fit in memory names --k, the queries and the size", "[inputs][memory]") {
    ScratchDir dir;
    run_python("import numpy as np\n"
               "x = np.random.default_rng(3).normal(size=(100000, 2)).astype('<f4')\n"
               "with open(" + quote(dir.path("x.fbin")) + ", 'wb') as f:\n"
               "    np.array(x.shape, dtype='<u4').tofile(f)\n"
               "    x.tofile(f)\n");
    const std::string vlat = dir.path("x.vlat");
    REQUIRE(run_cli("compress " + quote(dir.path("x.fbin")) + " -o " + quote(vlat) +
                    " -m 2 --iters 1 --device cpu --quiet").exit_code == 0);
    const CommandResult run =
        run_cli_within(2000000, "query " + quote(vlat) + " --queries " + quote(dir.path("x.fbin")) +
                                    " --limit 3000 --k 100000 --nprobe all --device cpu");
    INFO(run.output);
    CHECK(run.exit_code == 1);
    CHECK_THAT(run.output, Contains("--k 100000 for 3,000 queries: 3,000 x 100,000 neighbours (ids and distances) "
                                    "needs 3.6 GB (3,600,000,000 bytes) of memory"));
}
