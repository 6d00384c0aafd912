// Vector readers and writers, checked against files that numpy and h5py write (the files users
// bring), and every way a file can be wrong producing an Error that names the file and the spot.
#include "support.hpp"

#include "format/temporary_files.hpp"
#include "io/hdf5_writer.hpp"
#include "vlattice/atomic_file.hpp"
#include "vlattice/format.hpp"
#include "vlattice/half.hpp"
#include "vlattice/io.hpp"

#include <catch2/catch.hpp>

#include <omp.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <thread>
#include <vector>

using Catch::Contains;
using vlattice::Error;
using vlattice::Matrix;
using vlattice::ReadOptions;
using vlattice::read_vectors;
using vlattice::test::ScratchDir;
using vlattice::test::run_python;
using vlattice::Metric;
using vlattice::input_metric;
using vlattice::test::write_file;

namespace {

template <typename T>
std::string bytes_of(T value) {
    std::string bytes(sizeof value, '\0');
    std::memcpy(bytes.data(), &value, sizeof value);
    return bytes;
}

std::string bytes_of(const Matrix& points) {
    return std::string(reinterpret_cast<const char*>(points.data.data()), points.data.size() * sizeof(float));
}

std::string quoted(const std::string& text) {
    return "'" + text + "'";
}

// numpy gets the test's data as raw float32 (np.fromfile), so every value it writes is known here.
std::string load_in_python(const ScratchDir& dir, const Matrix& points) {
    write_file(dir.path("expected.raw"), bytes_of(points));
    return "import numpy as np\n"
           "x = np.fromfile(" + quoted(dir.path("expected.raw")) + ", dtype='<f4').reshape(" +
           std::to_string(points.rows) + ", " + std::to_string(points.cols) + ")\n";
}

const char* const kWriteTexmex =
    "def write_texmex(path, x, dtype):\n"
    "    rows = np.empty(x.shape[0], dtype=[('dim', '<i4'), ('values', dtype, (x.shape[1],))])\n"
    "    rows['dim'] = x.shape[1]\n"
    "    rows['values'] = x\n"
    "    rows.tofile(path)\n";

Matrix random_bytes(std::size_t n, std::size_t d, std::mt19937_64& rng) {
    std::uniform_int_distribution<int> byte(0, 255);
    Matrix points(n, d);
    for (float& value : points.data) {
        value = static_cast<float>(byte(rng));
    }
    return points;
}

// Integers that float32 holds exactly, negative ones included.
Matrix random_ints(std::size_t n, std::size_t d, std::mt19937_64& rng) {
    std::uniform_int_distribution<int> integer(-(1 << 24), 1 << 24);
    Matrix points(n, d);
    for (float& value : points.data) {
        value = static_cast<float>(integer(rng));
    }
    return points;
}

Matrix rounded_to_half(Matrix points) {
    for (float& value : points.data) {
        value = vlattice::half_to_float(vlattice::float_to_half(value));
    }
    return points;
}

void require_same(const Matrix& got, const Matrix& expected) {
    REQUIRE(got.rows == expected.rows);
    REQUIRE(got.cols == expected.cols);
    REQUIRE(got.data.size() == expected.data.size());
    for (std::size_t i = 0; i < got.data.size(); ++i) {
        if (got.data[i] != expected.data[i]) {
            INFO("first difference at row " << i / got.cols << " column " << i % got.cols);
            REQUIRE(got.data[i] == expected.data[i]);
        }
    }
}

std::mt19937_64 seeded_rng() {
    return std::mt19937_64(vlattice::test::seed());
}

}  // namespace

TEST_CASE("TEXMEX files written by numpy read back exactly", "[io]") {
    INFO("seed " << vlattice::test::seed());
    auto rng = seeded_rng();
    ScratchDir dir;

    SECTION(".fvecs") {
        const Matrix expected = vlattice::test::random_points(517, 96, rng);
        run_python(load_in_python(dir, expected) + kWriteTexmex + "write_texmex(" + quoted(dir.path("x.fvecs")) +
                   ", x, '<f4')\n");
        require_same(read_vectors(dir.path("x.fvecs")), expected);
    }
    SECTION(".bvecs spanning several read blocks") {
        const Matrix expected = random_bytes(20000, 600, rng);
        run_python(load_in_python(dir, expected) + kWriteTexmex + "write_texmex(" + quoted(dir.path("x.bvecs")) +
                   ", x, 'u1')\n");
        require_same(read_vectors(dir.path("x.bvecs")), expected);
    }
    SECTION(".ivecs") {
        const Matrix expected = random_ints(300, 17, rng);
        run_python(load_in_python(dir, expected) + kWriteTexmex + "write_texmex(" + quoted(dir.path("x.ivecs")) +
                   ", x, '<i4')\n");
        require_same(read_vectors(dir.path("x.ivecs")), expected);
    }
}

TEST_CASE("big-ann files written by numpy read back exactly", "[io]") {
    INFO("seed " << vlattice::test::seed());
    auto rng = seeded_rng();
    ScratchDir dir;
    const char* const write_bigann =
        "def write_bigann(path, x, dtype):\n"
        "    with open(path, 'wb') as f:\n"
        "        np.array(x.shape, dtype='<u4').tofile(f)\n"
        "        x.astype(dtype).tofile(f)\n";

    SECTION(".fbin") {
        const Matrix expected = vlattice::test::random_points(1000, 33, rng);
        run_python(load_in_python(dir, expected) + write_bigann + "write_bigann(" + quoted(dir.path("x.fbin")) +
                   ", x, '<f4')\n");
        require_same(read_vectors(dir.path("x.fbin")), expected);
    }
    SECTION(".u8bin spanning several read blocks") {
        const Matrix expected = random_bytes(3000, 3001, rng);
        run_python(load_in_python(dir, expected) + write_bigann + "write_bigann(" + quoted(dir.path("x.u8bin")) +
                   ", x, 'u1')\n");
        require_same(read_vectors(dir.path("x.u8bin")), expected);
    }
}

TEST_CASE(".npy float32, float16 and uint8 in format versions 1.0, 2.0 and 3.0", "[io]") {
    INFO("seed " << vlattice::test::seed());
    auto rng = seeded_rng();
    ScratchDir dir;
    const std::string path = dir.path("x.npy");
    const auto save = [&](const Matrix& points, const std::string& dtype, const std::string& version) {
        run_python(load_in_python(dir, points) + "with open(" + quoted(path) + ", 'wb') as f:\n" +
                   "    np.lib.format.write_array(f, x.astype(" + quoted(dtype) + "), version=" + version + ")\n");
    };

    for (const std::string version : {"(1, 0)", "(2, 0)", "(3, 0)"}) {
        INFO("version " << version);
        const Matrix points = vlattice::test::random_points(211, 48, rng);
        save(points, "<f4", version);
        require_same(read_vectors(path), points);

        save(points, "<f2", version);
        require_same(read_vectors(path), rounded_to_half(points));

        const Matrix bytes = random_bytes(150, 784, rng);
        save(bytes, "u1", version);
        require_same(read_vectors(path), bytes);
    }
}

TEST_CASE(".npy written with np.save, large enough for several read blocks", "[io]") {
    INFO("seed " << vlattice::test::seed());
    auto rng = seeded_rng();
    ScratchDir dir;
    const Matrix points = vlattice::test::random_points(5000, 512, rng);
    run_python(load_in_python(dir, points) + "np.save(" + quoted(dir.path("x.npy")) + ", x.astype('<f2'))\n");
    require_same(read_vectors(dir.path("x.npy")), rounded_to_half(points));
}

TEST_CASE("a file read on several threads gives the values, the progress and the first bad row of a serial read",
          "[io]") {
    INFO("seed " << vlattice::test::seed());
    auto rng = seeded_rng();
    ScratchDir dir;
    const int threads = omp_get_max_threads();
    omp_set_num_threads(4);

    // 24 MB of float16: three read blocks.
    const Matrix points = vlattice::test::random_points(12000, 1000, rng);
    run_python(load_in_python(dir, points) + "np.save(" + quoted(dir.path("x.npy")) + ", x.astype('<f2'))\n");
    vlattice::ReadOptions options;
    std::vector<vlattice::ReadStatus> seen;
    options.progress = [&](const vlattice::ReadStatus& status) { seen.push_back(status); };
    require_same(read_vectors(dir.path("x.npy"), options), rounded_to_half(points));
    REQUIRE_FALSE(seen.empty());
    CHECK(seen.back().done == seen.back().total);
    CHECK(seen.back().total == 12000u * 1000u * 2u);
    CHECK(seen.back().rows == 12000u);
    for (std::size_t k = 1; k < seen.size(); ++k) {
        CHECK(seen[k].done >= seen[k - 1].done);
    }

    // 300,000 rows of 68 bytes: three read blocks, with rows of another dimension in the second and
    // the third. The lower one is named, whichever thread met its row first.
    std::string file;
    file.reserve(300000 * 68);
    for (std::int32_t i = 0; i < 300000; ++i) {
        file += bytes_of(std::int32_t{i == 200000 || i == 280000 ? 15 : 16}) + std::string(64, '\0');
    }
    write_file(dir.path("bad.fvecs"), file);
    for (int attempt = 0; attempt < 3; ++attempt) {
        CHECK_THROWS_WITH(read_vectors(dir.path("bad.fvecs")), Contains("row 200000 has dimension 15"));
    }

    // float64 beyond float32's range in two blocks: the first is named.
    run_python("import numpy as np\n"
               "x = np.zeros((40000, 64))\n"
               "x[39000, 5] = 1e300\n"
               "x[21000, 7] = -1e300\n"
               "np.save(" + quoted(dir.path("wide.npy")) + ", x)\n");
    CHECK_THROWS_WITH(read_vectors(dir.path("wide.npy")), Contains("row 21000 (0-based), column 7 (0-based)"));
    omp_set_num_threads(threads);
}

TEST_CASE("a file read by rows gives the rows a whole read gives", "[io]") {
    INFO("seed " << vlattice::test::seed());
    auto rng = seeded_rng();
    ScratchDir dir;
    const Matrix points = vlattice::test::random_points(3001, 40, rng);
    run_python(load_in_python(dir, points) + "np.save(" + quoted(dir.path("h.npy")) + ", x.astype('<f2'))\n" +
               "np.save(" + quoted(dir.path("d.npy")) + ", x.astype('<f8'))\n" +
               "with open(" + quoted(dir.path("b.u8bin")) + ", 'wb') as f:\n"
               "    np.array(x.shape, dtype='<u4').tofile(f)\n"
               "    np.clip(np.abs(x) * 10, 0, 255).astype('u1').tofile(f)\n" + kWriteTexmex +
               "write_texmex(" + quoted(dir.path("t.bvecs")) + ", np.clip(np.abs(x) * 10, 0, 255), 'u1')\n" +
               "write_texmex(" + quoted(dir.path("t.fvecs")) + ", x, '<f4')\n"
               "import h5py\n"
               "with h5py.File(" + quoted(dir.path("c.h5")) + ", 'w') as f:\n"
               "    f['train'] = x.astype('<f8')\n"
               "    f.create_dataset('packed', data=x, chunks=(100, 40), compression='gzip')\n");
    // An HDF5 dataset stored contiguously is read at its place in the file; a chunked one is not.
    for (const std::string name : {"h.npy", "d.npy", "b.u8bin", "t.bvecs", "t.fvecs", "c.h5"}) {
        INFO(name);
        const std::string path = dir.path(name);
        const Matrix whole = read_vectors(path);
        const std::unique_ptr<vlattice::VectorRows> rows = vlattice::open_vector_rows(path);
        REQUIRE(rows != nullptr);
        CHECK(rows->rows() == 3001);
        CHECK(rows->cols() == 40);
        Matrix part;
        rows->read_range(1000, 1500, part);
        REQUIRE(part.rows == 1500);
        CHECK(std::equal(part.data.begin(), part.data.end(), whole.row(1000)));
        const std::vector<std::uint32_t> picked = {0, 5, 6, 2999, 3000};
        const Matrix chosen = rows->selection(picked);
        for (std::size_t s = 0; s < picked.size(); ++s) {
            CHECK(std::equal(chosen.row(s), chosen.row(s) + 40, whole.row(picked[s])));
        }
        CHECK_THROWS_WITH(rows->read_range(3000, 2, part), Contains("rows 3000 to 3002 asked of 3001"));
        CHECK_THROWS_WITH(rows->selection({4, 3}), Contains("increasing"));
    }
    CHECK(vlattice::open_vector_rows(dir.path("c.h5"), ReadOptions{"packed"}) == nullptr);

    // A TEXMEX row of another dimension is named when read, in a range or a selection.
    std::string file;
    for (std::int32_t i = 0; i < 50; ++i) {
        file += bytes_of(std::int32_t{i == 37 ? 3 : 4}) + std::string(16, '\0');
    }
    write_file(dir.path("bad.fvecs"), file);
    const std::unique_ptr<vlattice::VectorRows> bad = vlattice::open_vector_rows(dir.path("bad.fvecs"));
    REQUIRE(bad != nullptr);
    Matrix part;
    CHECK_NOTHROW(bad->read_range(0, 37, part));
    CHECK_THROWS_WITH(bad->read_range(30, 10, part), Contains("row 37 has dimension 3, expected 4"));
    CHECK_THROWS_WITH(bad->selection({2, 37}), Contains("row 37 has dimension 3, expected 4"));
}

TEST_CASE("a file read by rows that shrinks after it was opened fails its next read, naming it", "[io]") {
    INFO("seed " << vlattice::test::seed());
    auto rng = seeded_rng();
    ScratchDir dir;
    const Matrix points = vlattice::test::random_points(5000, 64, rng);
    for (const std::string name : {"x.npy", "x.fbin", "x.fvecs"}) {
        INFO(name);
        const std::string path = dir.path(name);
        vlattice::write_vectors(path, points);
        const std::unique_ptr<vlattice::VectorRows> rows = vlattice::open_vector_rows(path);
        REQUIRE(rows != nullptr);
        Matrix part;
        rows->read_range(0, 1000, part);
        std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
        CHECK_THROWS_WITH(rows->read_range(4000, 1000, part), Contains(path + ": truncated"));
        CHECK_THROWS_WITH(rows->selection({10, 4990}), Contains(path + ": truncated"));
    }
}

TEST_CASE("HDF5: the dataset is chosen by name and converted to float32", "[io]") {
    INFO("seed " << vlattice::test::seed());
    auto rng = seeded_rng();
    ScratchDir dir;
    const Matrix train = vlattice::test::random_points(400, 25, rng);
    const Matrix test = vlattice::test::random_points(50, 25, rng);
    const Matrix ints = random_ints(70, 9, rng);
    write_file(dir.path("test.raw"), bytes_of(test));
    write_file(dir.path("ints.raw"), bytes_of(ints));
    const std::string path = dir.path("ann.hdf5");
    run_python(load_in_python(dir, train) +
               "import h5py\n"
               "t = np.fromfile(" + quoted(dir.path("test.raw")) + ", dtype='<f4').reshape(50, 25)\n"
               "i = np.fromfile(" + quoted(dir.path("ints.raw")) + ", dtype='<f4').reshape(70, 9)\n"
               "with h5py.File(" + quoted(path) + ", 'w') as f:\n"
               "    f['train'] = x\n"
               "    f['test'] = t.astype('<f8')\n"
               "    f['neighbors'] = i.astype('<i4')\n"
               "    f.create_dataset('packed/train', data=x, chunks=(64, 5), compression='gzip')\n"
               "    f.attrs['distance'] = 'euclidean'\n");

    require_same(read_vectors(path), train);
    require_same(read_vectors(path, ReadOptions{"test"}), test);
    require_same(read_vectors(path, ReadOptions{"neighbors"}), ints);
    require_same(read_vectors(path, ReadOptions{"packed/train"}), train);

    CHECK_THROWS_WITH(read_vectors(path, ReadOptions{"queries"}),
                      Contains(path) && Contains("no dataset 'queries'") && Contains("neighbors, packed, test, train"));
    CHECK_THROWS_WITH(read_vectors(path, ReadOptions{"packed/missing"}), Contains("no dataset 'packed/missing'"));
    CHECK_THROWS_WITH(read_vectors(path, ReadOptions{"packed"}),
                      Contains("dataset 'packed'") && Contains("cannot be opened as a dataset"));
}

TEST_CASE("HDF5: float16, float64, uint8 and int8 datasets, chunked and compressed, read as float32", "[io]") {
    ScratchDir dir;
    const std::string path = dir.path("types.h5");
    // Small integers and halves of them are exact in every one of these types.
    run_python("import h5py, numpy as np\n"
               "x = (np.arange(600).reshape(100, 6) % 97 - 40).astype('<f4') / 2\n"
               "with h5py.File(" + quoted(path) + ", 'w') as f:\n"
               "    f['f16'] = x.astype('<f2')\n"
               "    f.create_dataset('f16_gzip', data=x.astype('<f2'), chunks=(7, 6), compression='gzip')\n"
               "    f['f64'] = x.astype('<f8')\n"
               "    f.create_dataset('u8', data=(x + 20).astype('u1'), chunks=(33, 3), compression='gzip', shuffle=True)\n"
               "    f['i8'] = np.floor(x).astype('i1')\n");
    Matrix expected(100, 6);
    for (std::size_t e = 0; e < expected.data.size(); ++e) {
        expected.data[e] = static_cast<float>(static_cast<int>(e) % 97 - 40) / 2.0f;
    }
    require_same(read_vectors(path, ReadOptions{"f16"}), expected);
    require_same(read_vectors(path, ReadOptions{"f16_gzip"}), expected);
    require_same(read_vectors(path, ReadOptions{"f64"}), expected);
    Matrix shifted = expected;
    Matrix floored = expected;
    for (std::size_t e = 0; e < expected.data.size(); ++e) {
        shifted.data[e] = static_cast<float>(static_cast<int>(expected.data[e] + 20.0f));
        floored.data[e] = std::floor(expected.data[e]);
    }
    require_same(read_vectors(path, ReadOptions{"u8"}), shifted);
    require_same(read_vectors(path, ReadOptions{"i8"}), floored);
}

TEST_CASE("HDF5: the 'distance' attribute names the input's metric", "[io]") {
    ScratchDir dir;
    const auto file_with = [&](const std::string& name, const std::string& attribute) {
        const std::string path = dir.path(name);
        run_python("import h5py, numpy as np\n"
                   "with h5py.File(" + quoted(path) + ", 'w') as f:\n"
                   "    f['train'] = np.ones((3, 2), dtype='<f4')\n" +
                   (attribute.empty() ? "" : "    f.attrs['distance'] = " + attribute + "\n"));
        return path;
    };
    CHECK(input_metric(file_with("e.h5", "'euclidean'")) == Metric::l2);
    CHECK(input_metric(file_with("a.hdf5", "'angular'")) == Metric::angular);
    // Fixed-length byte strings, as some writers store them.
    CHECK(input_metric(file_with("fixed.h5", "np.bytes_(b'angular')")) == Metric::angular);
    // Inner product, by either name in use.
    CHECK(input_metric(file_with("ip.h5", "'ip'")) == Metric::ip);
    CHECK(input_metric(file_with("dot.h5", "'dot'")) == Metric::ip);
    CHECK_FALSE(input_metric(file_with("none.h5", "")).has_value());
    const std::string jaccard = file_with("j.h5", "'jaccard'");
    CHECK_THROWS_WITH(input_metric(jaccard), Contains(jaccard) && Contains("attribute 'distance' is 'jaccard'") &&
                                                 Contains("--metric"));
    CHECK_THROWS_WITH(input_metric(file_with("n.h5", "3")), Contains("attribute 'distance' is not text"));
    // Other formats carry no metric and are not opened for one.
    CHECK_FALSE(input_metric(dir.path("absent.fvecs")).has_value());
}

TEST_CASE("scripts/ann-hdf5 writes the ann-benchmarks layout with the exact neighbours", "[io][recipe]") {
    ScratchDir dir;
    const std::string path = dir.path("mixture.hdf5");
    const vlattice::test::CommandResult made =
        vlattice::test::run_command(std::string("'") + VLATTICE_SOURCE_DIR + "/scripts/ann-hdf5' synthetic 700 9 " +
                                    quoted(path) + " --queries 30 --clusters 5 --k 10 2>&1");
    INFO(made.output);
    REQUIRE(made.exit_code == 0);
    const Matrix train = read_vectors(path, ReadOptions{"train"});
    const Matrix test = read_vectors(path, ReadOptions{"test"});
    const Matrix neighbors = read_vectors(path, ReadOptions{"neighbors"});
    const Matrix distances = read_vectors(path, ReadOptions{"distances"});
    REQUIRE(train.rows == 700);
    REQUIRE(train.cols == 9);
    REQUIRE(test.rows == 30);
    REQUIRE(neighbors.rows == 30);
    REQUIRE(neighbors.cols == 10);
    CHECK(input_metric(path) == Metric::l2);
    // Brute force in double, nearest first, ties to the lower index.
    std::size_t wrong = 0;
    for (std::size_t q = 0; q < test.rows; ++q) {
        std::vector<std::pair<double, std::size_t>> all;
        for (std::size_t i = 0; i < train.rows; ++i) {
            double sum = 0.0;
            for (std::size_t k = 0; k < train.cols; ++k) {
                const double diff = static_cast<double>(test.row(q)[k]) - train.row(i)[k];
                sum += diff * diff;
            }
            all.emplace_back(sum, i);
        }
        std::sort(all.begin(), all.end());
        for (std::size_t r = 0; r < neighbors.cols; ++r) {
            wrong += static_cast<std::size_t>(neighbors.row(q)[r]) == all[r].second ? 0 : 1;
            wrong += std::abs(distances.row(q)[r] - std::sqrt(all[r].first)) <= 1e-4 * std::sqrt(all[r].first) ? 0 : 1;
        }
    }
    CHECK(wrong == 0);
}

TEST_CASE("HDF5 datasets that are not a readable (n, d) matrix", "[io]") {
    ScratchDir dir;
    const std::string path = dir.path("bad.h5");
    run_python("import h5py, numpy as np\n"
               "with h5py.File(" + quoted(path) + ", 'w') as f:\n"
               "    f['flat'] = np.zeros(10, dtype='<f4')\n"
               "    f['cube'] = np.zeros((2, 3, 4), dtype='<f4')\n"
               "    f['empty'] = np.zeros((0, 4), dtype='<f4')\n"
               "    f['names'] = np.array([[b'a', b'b']])\n"
               "    f.create_dataset('unwritten', shape=(1000000, 1000), dtype='<f4')\n"
               "    d = f.create_dataset('sparse', shape=(1000000000, 1000), dtype='<f4', chunks=(100, 100))\n"
               "    d[0:100, 0:100] = 1\n");

    CHECK_THROWS_WITH(read_vectors(path, ReadOptions{"flat"}),
                      Contains("dataset 'flat' has shape (10,)") && Contains("2-D"));
    CHECK_THROWS_WITH(read_vectors(path, ReadOptions{"cube"}), Contains("dataset 'cube' has shape (2, 3, 4)"));
    CHECK_THROWS_WITH(read_vectors(path, ReadOptions{"empty"}), Contains("dataset 'empty'") && Contains("no vectors"));
    CHECK_THROWS_WITH(read_vectors(path, ReadOptions{"names"}),
                      Contains("dataset 'names'") && Contains("integers or floating-point"));
    CHECK_THROWS_WITH(read_vectors(path, ReadOptions{"unwritten"}),
                      Contains("dataset 'unwritten' has no data written"));
    CHECK_THROWS_WITH(read_vectors(path, ReadOptions{"sparse"}),
                      Contains("dataset 'sparse' has only 1 of its") && Contains("chunks written"));
}

TEST_CASE("write_vectors round trips .fvecs, .npy and .hdf5, and numpy and h5py read what it wrote", "[io]") {
    INFO("seed " << vlattice::test::seed());
    auto rng = seeded_rng();
    ScratchDir dir;
    const Matrix points = vlattice::test::random_points(333, 70, rng);

    vlattice::write_vectors(dir.path("out.fvecs"), points);
    vlattice::write_vectors(dir.path("out.npy"), points);
    vlattice::write_vectors(dir.path("out.hdf5"), points);
    require_same(read_vectors(dir.path("out.fvecs")), points);
    require_same(read_vectors(dir.path("out.npy")), points);
    require_same(read_vectors(dir.path("out.hdf5")), points);

    run_python(load_in_python(dir, points) +
               "import h5py\n"
               "with h5py.File(" + quoted(dir.path("out.hdf5")) + ", 'r') as f:\n"
               "    assert list(f.keys()) == ['train'], list(f.keys())\n"
               "    assert f['train'].dtype == np.float32 and np.array_equal(f['train'][:], x)\n" +
               "a = np.load(" + quoted(dir.path("out.npy")) + ")\n"
               "assert a.dtype == np.float32 and a.shape == x.shape, (a.dtype, a.shape)\n"
               "assert a.flags['C_CONTIGUOUS']\n"
               "assert np.array_equal(a, x)\n"
               "with open(" + quoted(dir.path("out.npy")) + ", 'rb') as f:\n"
               "    assert np.lib.format.read_magic(f) == (1, 0)\n"
               "    np.lib.format.read_array_header_1_0(f)\n"
               "    assert f.tell() % 64 == 0, f.tell()\n"
               "rows = np.fromfile(" + quoted(dir.path("out.fvecs")) + ", dtype='<f4').reshape(x.shape[0], -1)\n"
               "assert (rows[:, 0].view('<i4') == x.shape[1]).all()\n"
               "assert np.array_equal(rows[:, 1:], x)\n");
}

TEST_CASE("write_vectors refuses what it cannot write", "[io]") {
    ScratchDir dir;
    Matrix points(2, 3);
    CHECK_THROWS_WITH(vlattice::write_vectors(dir.path("out.bin"), points),
                      Contains("out.bin") && Contains("'.bin'") && Contains(".fvecs .fbin .npy .h5 .hdf5"));
    CHECK_THROWS_WITH(vlattice::write_vectors(dir.path("no/such/folder/out.hdf5"), points),
                      Contains("no/such/folder/out.hdf5") && Contains("cannot write the HDF5 file"));
    CHECK_THROWS_WITH(vlattice::write_vectors(dir.path("out.fvecs"), Matrix()), Contains("no vectors to write"));
    CHECK_THROWS_WITH(vlattice::write_vectors(dir.path("no/such/folder/out.npy"), points),
                      Contains("no/such/folder/out.npy") && Contains("cannot create"));
    CHECK_THROWS_WITH(vlattice::write_vectors(dir.path("out"), points),
                      Contains("no file extension") && Contains(".fvecs .fbin .npy .h5 .hdf5"));
    CHECK(std::filesystem::is_empty(dir.dir()));
    // The extension's case does not matter, as for reading.
    vlattice::write_vectors(dir.path("OUT.NPY"), points);
    CHECK(vlattice::read_vectors(dir.path("OUT.NPY")).data == points.data);
}

namespace {

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

}  // namespace

TEST_CASE("a target that became a directory during the write is named, and no temporary file is left", "[io]") {
    ScratchDir dir;
    SECTION("AtomicFile") {
        const std::string target = dir.path("out.vlat");
        {
            vlattice::AtomicFile file(target);
            file.stream() << "payload";
            std::filesystem::create_directory(target);
            CHECK_THROWS_WITH(file.commit(), Contains(target) && Contains("cannot rename temporary file into place"));
        }
        CHECK(std::filesystem::is_directory(target));
    }
    SECTION("Hdf5Writer") {
        const std::string target = dir.path("out.hdf5");
        {
            vlattice::io::Hdf5Writer file(target);
            const std::vector<float> values{1.0F, 2.0F};
            file.dataset("train", H5T_NATIVE_FLOAT, {1, 2}, values.data());
            std::filesystem::create_directory(target);
            CHECK_THROWS_WITH(file.commit(), Contains(target) && Contains("cannot rename temporary file into place"));
        }
        CHECK(std::filesystem::is_directory(target));
    }
    CHECK(temporaries_in(dir.dir()).empty());
}

TEST_CASE("with every signal slot taken, an output is still written, and a slot given back is used again", "[io]") {
    ScratchDir dir;
    // Names that exist nowhere, so that a signal meanwhile would remove nothing.
    const std::string absent = dir.path("absent/never");
    std::vector<std::size_t> taken;
    for (std::size_t slot = vlattice::register_temporary(absent); slot != vlattice::kNoTemporarySlot;
         slot = vlattice::register_temporary(absent)) {
        taken.push_back(slot);
        REQUIRE(taken.size() <= 64);
    }
    CHECK_FALSE(taken.empty());
    const std::string target = dir.path("out.vlat");
    {
        vlattice::AtomicFile file(target);
        file.stream() << "payload";
        file.commit();
    }
    CHECK(vlattice::test::read_file(target) == "payload");
    CHECK(temporaries_in(dir.dir()).empty());
    vlattice::forget_temporary(taken.back());
    CHECK(vlattice::register_temporary(absent) == taken.back());
    for (const std::size_t slot : taken) {
        vlattice::forget_temporary(slot);
    }
}

TEST_CASE("an unknown extension lists the supported ones", "[io]") {
    CHECK_THROWS_WITH(read_vectors("vectors.txt"),
                      Contains("vectors.txt") && Contains("'.txt'") &&
                          Contains(".fvecs .bvecs .ivecs .fbin .u8bin .i8bin .npy .h5 .hdf5"));
    CHECK_THROWS_WITH(read_vectors("vectors"), Contains("vectors: no file extension") && Contains(".npy"));
}

TEST_CASE("a missing or empty file is named, whatever its format", "[io]") {
    ScratchDir dir;
    for (const std::string extension :
         {".fvecs", ".bvecs", ".ivecs", ".fbin", ".u8bin", ".i8bin", ".npy", ".h5", ".hdf5"}) {
        INFO(extension);
        const std::string missing = dir.path("missing" + extension);
        CHECK_THROWS_WITH(read_vectors(missing), Contains(missing) && Contains("No such file"));
        const std::string empty = dir.path("empty" + extension);
        write_file(empty, "");
        CHECK_THROWS_WITH(read_vectors(empty), Contains(empty + ": empty file"));
    }
    std::filesystem::create_directory(dir.path("folder.fvecs"));
    CHECK_THROWS_WITH(read_vectors(dir.path("folder.fvecs")), Contains("folder.fvecs: not a regular file"));
}

TEST_CASE("a named pipe is refused at once, whatever its format, not waited on for a writer", "[io]") {
    ScratchDir dir;
    const std::vector<std::string> extensions = {".fvecs", ".bvecs", ".ivecs", ".fbin", ".u8bin",
                                                 ".i8bin", ".npy",    ".h5",    ".hdf5", ".vlat"};
    for (const std::string& extension : extensions) {
        INFO(extension);
        const std::string pipe = dir.path("pipe" + extension);
        REQUIRE(::mkfifo(pipe.c_str(), 0600) == 0);
        // A reader stuck in open() is let go after two seconds by a writer that opens the pipe, and
        // the test fails; one that refuses the pipe at once never needs it.
        std::atomic<bool> returned{false};
        std::atomic<bool> had_to_release{false};
        std::thread release([&] {
            for (int tick = 0; tick < 200 && !returned; ++tick) {
                std::this_thread::sleep_for(std::chrono::milliseconds(10));
            }
            if (!returned) {
                had_to_release = true;
                const int fd = ::open(pipe.c_str(), O_RDWR | O_NONBLOCK);
                std::this_thread::sleep_for(std::chrono::milliseconds(500));
                ::close(fd);
            }
        });
        const auto read = [&] {
            if (extension == ".vlat") {
                vlattice::read_vlat(pipe);
            } else {
                read_vectors(pipe);
            }
        };
        CHECK_THROWS_WITH(read(), Contains(pipe + ": not a regular file"));
        returned = true;
        release.join();
        CHECK_FALSE(had_to_release);
    }
}

TEST_CASE("truncated files say what was expected", "[io]") {
    INFO("seed " << vlattice::test::seed());
    auto rng = seeded_rng();
    ScratchDir dir;
    const Matrix points = vlattice::test::random_points(20, 16, rng);
    const auto cut = [&](const std::string& name, std::size_t drop) {
        const std::string whole = vlattice::test::read_file(dir.path(name));
        const std::string path = dir.path("cut-" + name);
        write_file(path, whole.substr(0, whole.size() - drop));
        return path;
    };

    vlattice::write_vectors(dir.path("x.fvecs"), points);
    CHECK_THROWS_WITH(read_vectors(cut("x.fvecs", 10)),
                      Contains("truncated") && Contains("row 19 has 58 of its 68 bytes"));
    CHECK_THROWS_WITH(read_vectors(cut("x.fvecs", 20 * 68 - 2)), Contains("truncated"));

    vlattice::write_vectors(dir.path("x.npy"), points);
    CHECK_THROWS_WITH(read_vectors(cut("x.npy", 4)),
                      Contains("cut-x.npy: truncated") && Contains("(20, 16)") && Contains("1280"));
    const std::string npy_header_only = cut("x.npy", 20 * 16 * 4 + 30);
    CHECK_THROWS_WITH(read_vectors(npy_header_only), Contains("truncated") && Contains("header"));

    write_file(dir.path("x.fbin"), bytes_of(std::uint32_t{20}) + bytes_of(std::uint32_t{16}) + bytes_of(points));
    CHECK_THROWS_WITH(read_vectors(cut("x.fbin", 1)),
                      Contains("truncated") && Contains("20 x 16 float32") && Contains("1287 bytes"));
    write_file(dir.path("short.u8bin"), bytes_of(std::uint32_t{20}).substr(0, 3));
    CHECK_THROWS_WITH(read_vectors(dir.path("short.u8bin")), Contains("truncated") && Contains("header"));

    run_python("import h5py, numpy as np\n"
               "with h5py.File(" + quoted(dir.path("x.h5")) + ", 'w') as f:\n"
               "    f['train'] = np.ones((1000, 16), dtype='<f4')\n");
    CHECK_THROWS_WITH(read_vectors(cut("x.h5", 1000)), Contains("cut-x.h5") && Contains("truncated"));
}

TEST_CASE("a row of another dimension is named", "[io]") {
    ScratchDir dir;
    const auto row = [](std::int32_t dim, std::size_t values) {
        return bytes_of(dim) + std::string(values * sizeof(float), '\0');
    };
    std::string file;
    for (int i = 0; i < 20; ++i) {
        file += i == 3 ? row(12, 12) : row(16, 16);
    }
    write_file(dir.path("short-row.fvecs"), file);
    CHECK_THROWS_WITH(read_vectors(dir.path("short-row.fvecs")),
                      Contains("short-row.fvecs: row 3 has dimension 12, expected 16"));

    // Same length as a good file: only the header of row 17 is wrong.
    file.clear();
    for (int i = 0; i < 20; ++i) {
        file += bytes_of(std::int32_t{i == 17 ? 12 : 16}) + std::string(16, 'x');
    }
    write_file(dir.path("bad-header.bvecs"), file);
    CHECK_THROWS_WITH(read_vectors(dir.path("bad-header.bvecs")), Contains("row 17 has dimension 12, expected 16"));

    write_file(dir.path("zero.ivecs"), row(0, 0) + row(0, 0));
    CHECK_THROWS_WITH(read_vectors(dir.path("zero.ivecs")), Contains("row 0 has dimension 0"));
    write_file(dir.path("negative.fvecs"), row(-5, 4));
    CHECK_THROWS_WITH(read_vectors(dir.path("negative.fvecs")), Contains("row 0 has dimension -5"));
}

TEST_CASE("headers promising more than the file holds are rejected before allocating", "[io]") {
    ScratchDir dir;
    const std::string padding(64, '\0');

    write_file(dir.path("huge.fvecs"), bytes_of(std::int32_t{1 << 30}) + padding);
    CHECK_THROWS_WITH(read_vectors(dir.path("huge.fvecs")),
                      Contains("truncated") && Contains("dimension 1073741824") && Contains("4294967300 bytes"));
    write_file(dir.path("huge.bvecs"), bytes_of(std::numeric_limits<std::int32_t>::max()) + padding);
    CHECK_THROWS_WITH(read_vectors(dir.path("huge.bvecs")), Contains("truncated"));

    const std::uint32_t most = std::numeric_limits<std::uint32_t>::max();
    write_file(dir.path("huge.fbin"), bytes_of(most) + bytes_of(most) + padding);
    CHECK_THROWS_WITH(read_vectors(dir.path("huge.fbin")), Contains("huge.fbin") && Contains("corrupt"));
    write_file(dir.path("huge.u8bin"), bytes_of(most) + bytes_of(most) + padding);
    CHECK_THROWS_WITH(read_vectors(dir.path("huge.u8bin")),
                      Contains("truncated") && Contains("4294967295 x 4294967295 uint8"));

    const auto npy = [](const std::string& header) {
        return std::string("\x93NUMPY\x01\x00", 8) + bytes_of(static_cast<std::uint16_t>(header.size())) + header;
    };
    write_file(dir.path("huge.npy"), npy("{'descr': '<f4', 'fortran_order': False, 'shape': (10000000000000, 1000000), }\n") + padding);
    CHECK_THROWS_WITH(read_vectors(dir.path("huge.npy")), Contains("huge.npy") && Contains("corrupt"));
    write_file(dir.path("big.npy"), npy("{'descr': '|u1', 'fortran_order': False, 'shape': (1000000, 1000000), }\n") + padding);
    CHECK_THROWS_WITH(read_vectors(dir.path("big.npy")), Contains("truncated") && Contains("(1000000, 1000000)"));
    write_file(dir.path("overflow.npy"), npy("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999, 1), }\n"));
    CHECK_THROWS_WITH(read_vectors(dir.path("overflow.npy")), Contains("'shape'") && Contains("too large"));
    write_file(dir.path("long-header.npy"),
               std::string("\x93NUMPY\x02\x00", 8) + bytes_of(std::uint32_t{0xffffffff}) + padding);
    CHECK_THROWS_WITH(read_vectors(dir.path("long-header.npy")),
                      Contains("truncated") && Contains("header is 4294967295 bytes"));
}

TEST_CASE("files with no vectors are rejected", "[io]") {
    ScratchDir dir;
    write_file(dir.path("none.fbin"), bytes_of(std::uint32_t{0}) + bytes_of(std::uint32_t{8}));
    CHECK_THROWS_WITH(read_vectors(dir.path("none.fbin")), Contains("none.fbin: no vectors"));
    run_python("import numpy as np\n"
               "np.save(" + quoted(dir.path("none.npy")) + ", np.zeros((0, 8), dtype='<f4'))\n");
    CHECK_THROWS_WITH(read_vectors(dir.path("none.npy")), Contains("none.npy: no vectors"));
}

TEST_CASE(".npy files vlattice cannot use name the header field", "[io]") {
    ScratchDir dir;
    const std::string path = dir.path("x.npy");
    const auto save = [&](const std::string& expression) {
        run_python("import numpy as np\nnp.save(" + quoted(path) + ", " + expression + ")\n");
    };

    save("np.zeros((4, 3), dtype='<c16')");
    CHECK_THROWS_WITH(read_vectors(path), Contains("'descr' is '<c16'") && Contains("'<f8' (float64)"));
    save("np.zeros((4, 3), dtype='>f4')");
    CHECK_THROWS_WITH(read_vectors(path), Contains("'descr' is '>f4'"));
    save("np.zeros((4, 3), dtype='<i8')");
    CHECK_THROWS_WITH(read_vectors(path), Contains("'descr' is '<i8'"));
    save("np.zeros(4, dtype=[('a', '<f4'), ('b', '<f4')]).reshape(2, 2)");
    CHECK_THROWS_WITH(read_vectors(path), Contains("'descr' is a structured dtype"));
    save("np.asfortranarray(np.zeros((4, 3), dtype='<f4'))");
    CHECK_THROWS_WITH(read_vectors(path), Contains("'fortran_order' is True"));
    save("np.zeros(12, dtype='<f4')");
    CHECK_THROWS_WITH(read_vectors(path), Contains("'shape' is (12,)") && Contains("2-D"));
    save("np.zeros((2, 3, 2), dtype='<f4')");
    CHECK_THROWS_WITH(read_vectors(path), Contains("'shape' is (2, 3, 2)"));
    save("np.zeros((4, 0), dtype='<f4')");
    CHECK_THROWS_WITH(read_vectors(path), Contains("'shape' is (4, 0)"));

    write_file(path, "\x93NUMPZ and then some bytes");
    CHECK_THROWS_WITH(read_vectors(path), Contains("not a .npy file"));
    write_file(path, std::string("\x93NUMPY\x04\x00", 8) + "0000");
    CHECK_THROWS_WITH(read_vectors(path), Contains("version 4.0"));
    const std::string header = "{'descr': '<f4', 'shape': (1, 1), }\n";
    write_file(path, std::string("\x93NUMPY\x01\x00", 8) + bytes_of(static_cast<std::uint16_t>(header.size())) +
                         header + bytes_of(1.0f));
    CHECK_THROWS_WITH(read_vectors(path), Contains("no 'fortran_order' field"));
    const std::string broken = "{'descr': '<f4', 'fortran_order': False, 'shape': (1 1), }\n";
    write_file(path, std::string("\x93NUMPY\x01\x00", 8) + bytes_of(static_cast<std::uint16_t>(broken.size())) +
                         broken + bytes_of(1.0f));
    CHECK_THROWS_WITH(read_vectors(path), Contains("malformed .npy header"));
    save("np.zeros((4, 3), dtype='<f4')");
    write_file(path, vlattice::test::read_file(path) + "junk");
    CHECK_THROWS_WITH(read_vectors(path), Contains("4 bytes after the data"));
}

TEST_CASE("check_finite names the row and column of a NaN or Inf", "[io]") {
    Matrix points(50, 8);
    CHECK_NOTHROW(vlattice::check_finite(points, "ok.fvecs"));

    points.row(41)[3] = std::nanf("");
    CHECK_THROWS_WITH(vlattice::check_finite(points, "x.fvecs"),
                      Contains("x.fvecs: row 41 (0-based), column 3 (0-based) is NaN"));
    points.row(7)[0] = std::numeric_limits<float>::infinity();
    CHECK_THROWS_WITH(vlattice::check_finite(points, "x.fvecs"), Contains("row 7 (0-based), column 0") &&
                                                                     Contains("is Inf"));
    points.row(2)[5] = -std::numeric_limits<float>::infinity();
    CHECK_THROWS_WITH(vlattice::check_finite(points, "x.fvecs"), Contains("row 2 (0-based), column 5 (0-based) is -Inf"));
}

TEST_CASE("NaN read from a numpy file is reported by check_finite", "[io]") {
    ScratchDir dir;
    const std::string path = dir.path("nan.npy");
    run_python("import numpy as np\n"
               "x = np.ones((100, 4), dtype='<f2')\n"
               "x[63, 2] = np.nan\n"
               "np.save(" + quoted(path) + ", x)\n");
    const Matrix points = read_vectors(path);
    CHECK_THROWS_WITH(vlattice::check_finite(points, path), Contains(path + ": row 63 (0-based), column 2"));
}
