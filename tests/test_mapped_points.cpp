// Points that stay in their file under --memory: what a mapped set reads, what stays resident, a fit
// and a compress of mapped points against those of the held points, bit for bit, the inputs that
// cannot be mapped, and a file that shrinks under its mapping.
#include "stored_points.hpp"
#include "support.hpp"

#include "format/temporary_files.hpp"
#include "io/hdf5.hpp"
#include "vlattice/anneal.hpp"
#include "vlattice/codec.hpp"
#include "vlattice/cpu_backend.hpp"
#include "vlattice/io.hpp"
#include "vlattice/pipeline.hpp"

#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <thread>

using namespace vlattice;
using namespace vlattice::test;

namespace {

constexpr std::uint64_t kSmallLimit = 64 * 1024;

ReadOptions within(std::uint64_t memory) {
    ReadOptions options;
    options.memory = memory;
    options.memory_given = true;
    return options;
}

// Resident pages backed by files, in bytes (statm's third field).
std::uint64_t file_resident_bytes() {
    std::FILE* in = std::fopen("/proc/self/statm", "r");
    unsigned long long size = 0;
    unsigned long long resident = 0;
    unsigned long long shared = 0;
    const bool read = in != nullptr && std::fscanf(in, "%llu %llu %llu", &size, &resident, &shared) == 3;
    if (in != nullptr) {
        std::fclose(in);
    }
    REQUIRE(read);
    return shared * static_cast<std::uint64_t>(::sysconf(_SC_PAGE_SIZE));
}

}  // namespace

TEST_CASE("a mapped set reads the rows its file holds", "[points][mapped]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const StoredType type = GENERATE(StoredType::f32, StoredType::f16, StoredType::u8, StoredType::i8);
    // TEXMEX rows lie a dimension apart in their file; .fvecs and .bvecs hold float32 and uint8.
    const bool texmex = GENERATE(false, true);
    if (texmex && type != StoredType::f32 && type != StoredType::u8) {
        return;
    }
    INFO(stored_type_name(type) << (texmex ? " TEXMEX" : ""));
    ScratchDir dir;
    const StoredCase c = stored_mixture(type == StoredType::f32 ? StoredType::f16 : type, 20000, 24, rng);
    const std::string path = texmex ? write_texmex_file(dir, c, type) : write_stored_file(dir, c, type);
    const PointSet mapped = read_stored_points(path, within(kSmallLimit));
    const PointView view = mapped.view();
    REQUIRE(view.mapped());
    CHECK(mapped.type() == type);
    CHECK(view.rows == c.values.rows);
    CHECK(view.cols == c.values.cols);
    CHECK(view.widened().data == c.values.data);
    std::vector<std::uint32_t> picked(view.rows);
    std::iota(picked.begin(), picked.end(), 0u);
    std::shuffle(picked.begin(), picked.end(), rng);
    picked.resize(3000);
    CHECK(view.select(picked).data == select_rows(c.values, picked).data);
    std::vector<std::uint32_t> tail(3000);
    std::iota(tail.begin(), tail.end(), 17000u);
    CHECK(view.slice(17000, 3000).widened().data == select_rows(c.values, tail).data);
    std::vector<float> scratch;
    const float* block = view.block(5, 7, scratch);
    CHECK(std::vector<float>(block, block + 7 * c.values.cols) ==
          std::vector<float>(c.values.row(5), c.values.row(12)));
    // Packed in the stored type, without TEXMEX's leads: the held set's bytes.
    const PointSet held = read_stored_points(path);
    const std::size_t row_bytes = c.values.cols * stored_type_bytes(type);
    std::vector<char> packed(3000 * row_bytes);
    view.pack_rows(17000, 3000, packed.data());
    CHECK(std::memcmp(packed.data(), held.view().raw_rows(17000, 3000), packed.size()) == 0);
    // A set within the bound is held, not mapped.
    CHECK_FALSE(held.view().mapped());
}

TEST_CASE("a mapped set keeps about its limit of the file resident", "[points][mapped]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    ScratchDir dir;
    // 48 MB of uint8 rows, read in a random order, one row at a time, as the reduce reads members.
    const std::size_t n = 375000;
    const std::size_t d = 128;
    PointSet set = PointSet::unset(StoredType::u8, n, d);
    auto* bytes = static_cast<std::uint8_t*>(set.values());
    for (std::size_t e = 0; e < n * d; ++e) {
        bytes[e] = static_cast<std::uint8_t>(rng());
    }
    const std::string name = GENERATE(std::string("x.u8bin"), std::string("x.bvecs"));
    INFO(name);
    if (name == "x.u8bin") {
        write_bigann(dir.path(name), set);
    } else {
        write_bvecs(dir.path(name), set);
    }
    const std::uint64_t limit = 8u << 20;
    const std::uint64_t before = file_resident_bytes();
    const PointSet mapped = read_stored_points(dir.path(name), within(limit));
    const PointView view = mapped.view();
    REQUIRE(view.mapped());
    std::vector<std::uint32_t> order(n);
    std::iota(order.begin(), order.end(), 0u);
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<float> scratch(d);
    double sum = 0.0;
    std::uint64_t most = 0;
    for (std::size_t r = 0; r < n; ++r) {
        sum += view.row(order[r], scratch.data())[0];
        if (r % 5000 == 0) {
            most = std::max(most, file_resident_bytes());
        }
    }
    double want = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
        want += bytes[i * d];
    }
    CHECK(sum == want);
    INFO("file pages resident beyond those before: at most " << (most - std::min(most, before)) << " bytes");
    CHECK(most <= before + limit);
}

TEST_CASE("the finite check of mapped rows keeps about its limit of the file resident", "[points][mapped]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    ScratchDir dir;
    // 48 MB of float32 rows, as .npy, all finite: the check reads every value once, on the threads,
    // while another thread watches the resident file pages.
    write_vectors(dir.path("x.npy"), stored_mixture(StoredType::f16, 93750, 128, rng).values);
    const std::uint64_t limit = 8u << 20;
    const std::uint64_t before = file_resident_bytes();
    const PointSet mapped = read_stored_points(dir.path("x.npy"), within(limit));
    REQUIRE(mapped.view().mapped());
    std::atomic<bool> done{false};
    std::uint64_t most = 0;
    std::thread watch([&] {
        while (!done.load()) {
            most = std::max(most, file_resident_bytes());
            std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
    });
    CHECK_NOTHROW(check_finite(mapped.view(), "x.npy"));
    done = true;
    watch.join();
    INFO("file pages resident beyond those before: at most " << (most - std::min(most, before)) << " bytes");
    CHECK(most <= before + limit);
}

TEST_CASE("a fit of mapped points equals the fit of the held points", "[points][mapped][anneal]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const StoredType type = GENERATE(StoredType::f32, StoredType::f16, StoredType::u8, StoredType::i8);
    // d = 8 takes the direct scans and the bounds, d = 24 the GEMM.
    const std::size_t d = GENERATE(std::size_t{8}, std::size_t{24});
    const bool texmex = GENERATE(false, true);
    if (texmex && type != StoredType::f32 && type != StoredType::u8) {
        return;
    }
    INFO(stored_type_name(type) << ", d " << d << (texmex ? ", TEXMEX" : ""));
    ScratchDir dir;
    const StoredCase c = stored_mixture(type == StoredType::f32 ? StoredType::f16 : type, 12001, d, rng);
    const std::string path = texmex ? write_texmex_file(dir, c, type) : write_stored_file(dir, c, type);
    const PointSet held = read_stored_points(path);
    const PointSet mapped = read_stored_points(path, within(kSmallLimit));
    REQUIRE(mapped.view().mapped());
    AnnealConfig config;
    config.anchors = 24;
    config.max_iters = 12;
    config.maintenance_every = 4;
    config.seed = run_seed;
    config.validate_every = 5;
    auto cpu = make_cpu_backend(2);
    check_same_fit(fit(mapped.view(), config, *cpu), fit(held.view(), config, *cpu));
}

TEST_CASE("mapped points that a storage would round are refused", "[points][mapped][anneal]") {
    std::mt19937_64 rng(seed());
    ScratchDir dir;
    write_vectors(dir.path("x.fbin"), random_points(5000, 8, rng));
    const PointSet mapped = read_stored_points(dir.path("x.fbin"), within(kSmallLimit));
    REQUIRE(mapped.view().mapped());
    AnnealConfig config;
    config.anchors = 8;
    config.storage = PointStorage::f16;
    auto cpu = make_cpu_backend(2);
    CHECK_THROWS_WITH(fit(mapped.view(), config, *cpu),
                      Catch::Contains("stay in their file (--memory)") && Catch::Contains("--storage f16"));
}

TEST_CASE("inputs whose rows cannot be mapped are refused under --memory", "[points][mapped][io]") {
    std::mt19937_64 rng(seed());
    ScratchDir dir;
    const StoredCase c = stored_mixture(StoredType::u8, 6000, 16, rng);  // 96 kB as uint8
    write_vectors(dir.path("x.h5"), c.values);
    // .ivecs: int32 values, which are converted to float32 as they are read.
    std::string ivecs;
    for (std::size_t i = 0; i < c.values.rows; ++i) {
        ivecs += bytes_of(static_cast<std::int32_t>(c.values.cols));
        for (std::size_t k = 0; k < c.values.cols; ++k) {
            ivecs += bytes_of(static_cast<std::int32_t>(c.values.row(i)[k]));
        }
    }
    write_file(dir.path("x.ivecs"), ivecs);
    CHECK_THROWS_WITH(read_stored_points(dir.path("x.ivecs"), within(kSmallLimit)),
                      Catch::Contains(dir.path("x.ivecs")) && Catch::Contains("more than --memory") &&
                          Catch::Contains("converted to float32"));
    // Without --memory given, the bound only maps what it can and reads the rest whole.
    ReadOptions automatic = within(kSmallLimit);
    automatic.memory_given = false;
    CHECK(read_stored_points(dir.path("x.ivecs"), automatic).view().widened().data == c.values.data);

    // A TEXMEX row of another dimension is named before anything is mapped, as a whole read names it.
    write_bvecs(dir.path("x.bvecs"), c.stored);
    std::string bvecs = read_file(dir.path("x.bvecs"));
    const std::int32_t wrong = 15;
    bvecs.replace(4321 * (4 + c.values.cols), 4, bytes_of(wrong));
    write_file(dir.path("bad.bvecs"), bvecs);
    CHECK_THROWS_WITH(read_stored_points(dir.path("bad.bvecs"), within(kSmallLimit)),
                      Catch::Contains(dir.path("bad.bvecs") + ": row 4321 has dimension 15, expected 16"));
    // vlattice writes contiguous HDF5 datasets: those are mapped like any array.
    const PointSet h5 = read_stored_points(dir.path("x.h5"), within(kSmallLimit));
    CHECK(h5.view().mapped());
    CHECK(h5.view().widened().data == c.values.data);
    CHECK_THROWS_WITH(load_stored_points(dir.path("x.h5"), within(kSmallLimit), Metric::angular),
                      Catch::Contains("--metric angular"));
}

TEST_CASE("HDF5 datasets are held in their stored type, and contiguous ones are mapped under --memory",
          "[points][mapped][io]") {
    ScratchDir dir;
    const std::string path = dir.path("types.h5");
    // Small integers and halves of them are exact in every one of these types; 6,000 x 16 uint8
    // values take more than kSmallLimit.
    run_python("import h5py, numpy as np\n"
               "x = (np.arange(6000 * 16).reshape(6000, 16) % 97 - 40).astype('<f4') / 2\n"
               "with h5py.File('" + path + "', 'w') as f:\n"
               "    f['f16'] = x.astype('<f2')\n"
               "    f['f16_big'] = x.astype('>f2')\n"
               "    f['u8'] = (x + 20).astype('u1')\n"
               "    f.create_dataset('u8_gzip', data=(x + 20).astype('u1'), chunks=(333, 16), compression='gzip')\n"
               "    f['i8'] = np.floor(x).astype('i1')\n"
               "    f['f64'] = x.astype('<f8')\n"
               "with h5py.File('" + dir.path("odd.h5") + "', 'w') as f:\n"
               "    f['pad'] = np.zeros((3, 3), 'u1')\n"
               "    f['f32_odd'] = x\n");
    Matrix halves(6000, 16);
    for (std::size_t e = 0; e < halves.data.size(); ++e) {
        halves.data[e] = static_cast<float>(static_cast<int>(e % 97) - 40) / 2.0f;
    }
    Matrix shifted = halves;
    Matrix floored = halves;
    for (std::size_t e = 0; e < halves.data.size(); ++e) {
        shifted.data[e] = std::trunc(halves.data[e] + 20.0f);
        floored.data[e] = std::floor(halves.data[e]);
    }
    struct Dataset {
        const char* name;
        StoredType type;
        const Matrix& values;
        const char* unmappable;  // why it cannot stay in the file, or nullptr
    };
    const Dataset datasets[] = {
        {"f16", StoredType::f16, halves, nullptr},
        {"f16_big", StoredType::f16, halves, "big-endian"},
        {"u8", StoredType::u8, shifted, nullptr},
        {"u8_gzip", StoredType::u8, shifted, "not stored contiguously"},
        {"i8", StoredType::i8, floored, nullptr},
        {"f64", StoredType::f32, halves, "converted to float32"},
    };
    // libhdf5 puts raw data at any byte: behind 9 bytes of uint8, h5py's float32 starts at an odd one.
    // A mapping would hand out misaligned floats; reads at the offset copy them out.
    const std::string odd_path = dir.path("odd.h5");
    const io::Hdf5Placement odd = io::hdf5_placement(odd_path, "f32_odd");
    REQUIRE(odd.layout);
    REQUIRE(odd.layout->offset % 4 != 0);
    ReadOptions odd_bounded = within(kSmallLimit);
    odd_bounded.dataset = "f32_odd";
    CHECK_THROWS_WITH(read_stored_points(odd_path, odd_bounded), Catch::Contains("not at a multiple of their size"));
    CHECK(open_vector_rows(odd_path, odd_bounded)->selection({0, 5999}).data == select_rows(halves, {0, 5999}).data);
    for (const Dataset& d : datasets) {
        INFO(d.name);
        ReadOptions held;
        held.dataset = d.name;
        // A contiguous little-endian dataset is also read by rows at its place in the file (a
        // --train-sample run reads only its sample), float64 narrowed as it is read.
        const std::unique_ptr<VectorRows> by_rows = open_vector_rows(path, held);
        const bool in_place = std::string(d.name) != "u8_gzip" && std::string(d.name) != "f16_big";
        REQUIRE((by_rows != nullptr) == in_place);
        if (by_rows) {
            const std::vector<std::uint32_t> picked = {0, 5, 4321, 5999};
            CHECK(by_rows->selection(picked).data == select_rows(d.values, picked).data);
            Matrix tile;
            by_rows->read_range(100, 50, tile);
            CHECK(std::vector<float>(tile.data.begin(), tile.data.end()) ==
                  std::vector<float>(d.values.row(100), d.values.row(150)));
        }
        const PointSet whole = read_stored_points(path, held);
        CHECK_FALSE(whole.view().mapped());
        CHECK(whole.type() == d.type);
        CHECK(whole.view().widened().data == d.values.data);

        ReadOptions bounded = within(kSmallLimit);
        bounded.dataset = d.name;
        if (d.unmappable == nullptr) {
            const PointSet mapped = read_stored_points(path, bounded);
            CHECK(mapped.view().mapped());
            CHECK(mapped.type() == d.type);
            CHECK(mapped.view().widened().data == d.values.data);
        } else {
            CHECK_THROWS_WITH(read_stored_points(path, bounded),
                              Catch::Contains(path + ": dataset '" + d.name + "'") &&
                                  Catch::Contains("more than --memory") && Catch::Contains(d.unmappable));
            // Under the automatic bound, what cannot be mapped is read whole.
            bounded.memory_given = false;
            CHECK(read_stored_points(path, bounded).view().widened().data == d.values.data);
        }
    }
    // compress of a mapped dataset writes the file it writes holding the points.
    const std::string common = " --dataset u8 -m 16 --iters 6 --bits 4 --device cpu --threads 2 -q";
    REQUIRE(run_cli("compress " + quote(path) + " -o " + quote(dir.path("mapped.vlat")) + " --memory 64KiB" + common)
                .exit_code == 0);
    REQUIRE(run_cli("compress " + quote(path) + " -o " + quote(dir.path("held.vlat")) + common).exit_code == 0);
    CHECK(read_file(dir.path("mapped.vlat")) == read_file(dir.path("held.vlat")));
}

TEST_CASE("a file that shrinks under its mapping ends the run naming the file and the row",
          "[points][mapped][io]") {
    std::mt19937_64 rng(seed());
    ScratchDir dir;
    const StoredCase c = stored_mixture(StoredType::u8, 40000, 64, rng);
    write_bigann(dir.path("x.u8bin"), c.stored);
    const std::string temporary = dir.path("out.vlat.part");
    int pipe_ends[2];
    REQUIRE(::pipe(pipe_ends) == 0);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        // The child maps the file, registers an output's temporary file, cuts the file to 10 rows
        // and reads row 20000: the SIGBUS handler must end it.
        ::dup2(pipe_ends[1], STDERR_FILENO);
        const PointSet mapped = read_stored_points(dir.path("x.u8bin"), within(kSmallLimit));
        write_file(temporary, "partial");
        register_temporary(temporary);
        std::filesystem::resize_file(dir.path("x.u8bin"), 8 + 10 * 64);
        std::vector<float> scratch(64);
        const float value = mapped.view().row(20000, scratch.data())[0];
        std::_Exit(value >= 0.0f ? 3 : 4);  // not reached: the read past the end must not return
    }
    ::close(pipe_ends[1]);
    std::string message;
    char buffer[512];
    for (ssize_t got; (got = ::read(pipe_ends[0], buffer, sizeof buffer)) > 0;) {
        message.append(buffer, static_cast<std::size_t>(got));
    }
    ::close(pipe_ends[0]);
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    INFO(message);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 1);
    CHECK_THAT(message, Catch::Contains(dir.path("x.u8bin") + " shrank while its rows were read from it: row 20000"));
    CHECK_FALSE(std::filesystem::exists(temporary));
}

TEST_CASE("compress under --memory writes the file it writes holding the points", "[points][mapped][cli]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    ScratchDir dir;
    const StoredType type = GENERATE(StoredType::u8, StoredType::f16);
    INFO(stored_type_name(type));
    const StoredCase c = stored_mixture(type, 12000, 16, rng);
    const std::string path = write_stored_file(dir, c, type);
    for (const std::string options : {std::string("--bits 4"), std::string("--target-bytes 6")}) {
        INFO(options);
        const std::string common = " -m 32 --iters 8 --device cpu --threads 2 --seed " +
                                   std::to_string(run_seed % 100000) + " " + options;
        const CommandResult mapped =
            run_cli("compress " + quote(path) + " -o " + quote(dir.path("mapped.vlat")) + " --memory 64KiB" + common);
        REQUIRE(mapped.exit_code == 0);
        CHECK_THAT(mapped.output, Catch::Contains("they stay in " + path));
        REQUIRE(run_cli("compress " + quote(path) + " -o " + quote(dir.path("held.vlat")) + " -q" + common).exit_code ==
                0);
        CHECK(read_file(dir.path("mapped.vlat")) == read_file(dir.path("held.vlat")));
    }
    if (type == StoredType::u8) {
        // The same rows as .bvecs, mapped a row's dimension apart: the same anchors, ids and codes.
        const std::string bvecs = write_texmex_file(dir, c, type);
        const std::string common = " -m 32 --iters 8 --device cpu --threads 2 --bits 4 -q --seed " +
                                   std::to_string(run_seed % 100000);
        REQUIRE(run_cli("compress " + quote(bvecs) + " -o " + quote(dir.path("texmex.vlat")) + " --memory 64KiB" +
                        common).exit_code == 0);
        REQUIRE(run_cli("compress " + quote(path) + " -o " + quote(dir.path("array.vlat")) + common).exit_code == 0);
        const VlatFile texmex = read_vlat(dir.path("texmex.vlat"));
        const VlatFile array = read_vlat(dir.path("array.vlat"));
        CHECK(texmex.anchors.data == array.anchors.data);
        CHECK(texmex.assignments == array.assignments);
        CHECK(reconstruction_mse(texmex, c.values) == reconstruction_mse(array, c.values));
    }
    const CommandResult encoded = run_cli("encode " + quote(path) + " --model " + quote(dir.path("held.vlat")) +
                                          " -o " + quote(dir.path("encoded.vlat")) + " --memory 64KiB -q");
    REQUIRE(encoded.exit_code == 0);
    CHECK(read_vlat(dir.path("encoded.vlat")).assignments == read_vlat(dir.path("held.vlat")).assignments);

    const CommandResult bad = run_cli("compress " + quote(path) + " -o " + quote(dir.path("bad.vlat")) +
                                      " -m 8 --memory 12XB");
    CHECK(bad.exit_code != 0);
    CHECK_THAT(bad.output, Catch::Contains("--memory must be a size of at least 1 byte") && Catch::Contains("'12XB'"));
    const CommandResult bad_gpu = run_cli("compress " + quote(path) + " -o " + quote(dir.path("bad.vlat")) +
                                          " -m 8 --gpu-memory 0");
    CHECK(bad_gpu.exit_code != 0);
    CHECK_THAT(bad_gpu.output, Catch::Contains("--gpu-memory must be a size of at least 1 byte"));
    CHECK_FALSE(std::filesystem::exists(dir.path("bad.vlat")));
    write_vectors(dir.path("x.h5"), c.values);
    run_python("import h5py\n"
               "with h5py.File('" + dir.path("x.h5") + "', 'a') as f:\n"
               "    f.create_dataset('packed', data=f['train'][:], chunks=(1000, 16), compression='gzip')\n");
    const CommandResult chunked = run_cli("compress " + quote(dir.path("x.h5")) + " --dataset packed -o " +
                                          quote(dir.path("bad.vlat")) + " -m 8 --memory 64KiB");
    CHECK(chunked.exit_code != 0);
    CHECK_THAT(chunked.output, Catch::Contains("cannot be read in place") && Catch::Contains("not stored contiguously"));
    CHECK_FALSE(std::filesystem::exists(dir.path("bad.vlat")));
}
