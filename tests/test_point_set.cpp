// Points held in their stored type: the view's widening, the readers that keep the type, the checks
// on stored values, and fits, seeding and coding of stored points against those of their float32
// values, bit for bit.
#include "stored_points.hpp"
#include "support.hpp"

#include "fit/init.hpp"
#include "vlattice/anneal.hpp"
#include "vlattice/codec.hpp"
#include "vlattice/cpu_backend.hpp"
#include "vlattice/io.hpp"
#include "vlattice/model.hpp"
#include "vlattice/pipeline.hpp"
#include "vlattice/point_format.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <numeric>

using namespace vlattice;
using namespace vlattice::test;

TEST_CASE("a view widens every stored type to its float32 values", "[points]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const StoredType type = GENERATE(StoredType::f16, StoredType::u8, StoredType::i8);
    INFO(stored_type_name(type));
    // Enough values that widen_rows splits among the threads.
    const StoredCase c = stored_mixture(type, 3001, 37, rng);
    const PointView view = c.stored.view();
    CHECK(view.type() == type);
    CHECK(view.matrix() == nullptr);
    CHECK(c.stored.bytes() == 3001 * 37 * stored_type_bytes(type));
    CHECK(view.widened().data == c.values.data);
    std::vector<float> scratch(37);
    for (std::size_t i : {std::size_t{0}, std::size_t{1234}, std::size_t{3000}}) {
        const float* row = view.row(i, scratch.data());
        CHECK(std::equal(row, row + 37, c.values.row(i)));
    }
    const std::vector<std::uint32_t> picked = {3000, 5, 5, 17};
    CHECK(view.select(picked).data == select_rows(c.values, picked).data);
    const PointView part = view.slice(100, 50);
    CHECK(part.rows == 50);
    CHECK(part.widened().data == select_rows(c.values, [] {
                                     std::vector<std::uint32_t> rows(50);
                                     std::iota(rows.begin(), rows.end(), 100u);
                                     return rows;
                                 }()).data);
    // Packed in their stored bytes, as a GPU's tile of streamed points takes them.
    std::vector<char> packed(1500 * 37 * stored_type_bytes(type));
    view.pack_rows(1000, 1500, packed.data());
    CHECK(std::memcmp(packed.data(), static_cast<const char*>(view.data()) + 1000 * view.pitch(), packed.size()) == 0);
    std::vector<float> block;
    const float* values = view.block(10, 3, block);
    CHECK(std::equal(values, values + 3 * 37, c.values.row(10)));

    // A float32 view is its Matrix, in place.
    const PointView floats(c.values);
    CHECK(floats.matrix() == &c.values);
    CHECK(floats.row(7, nullptr) == c.values.row(7));
    CHECK(floats.block(2, 4, block) == c.values.row(2));
    Matrix widened;
    CHECK(&as_matrix(floats, widened) == &c.values);
    CHECK(as_matrix(view, widened).data == c.values.data);
}

TEST_CASE("read_stored_points keeps float16 and 8-bit files in their type", "[points][io]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    ScratchDir dir;
    const auto check_read = [&](const std::string& path, const StoredCase& c) {
        INFO(path);
        const PointSet read = read_stored_points(path);
        CHECK(read.type() == c.stored.type());
        CHECK(read.rows() == c.stored.rows());
        CHECK(read.cols() == c.stored.cols());
        CHECK(raw_values(read) == raw_values(c.stored));
        CHECK(read_vectors(path).data == c.values.data);
    };
    for (const StoredType type : {StoredType::f16, StoredType::u8, StoredType::i8}) {
        // More than one block of the parallel read.
        const StoredCase c = stored_mixture(type, 70001, 130, rng);
        write_stored_npy(dir.path("x.npy"), c.stored);
        check_read(dir.path("x.npy"), c);
        if (type != StoredType::f16) {
            const std::string big = dir.path(type == StoredType::u8 ? "x.u8bin" : "x.i8bin");
            write_bigann(big, c.stored);
            check_read(big, c);
        }
        if (type == StoredType::u8) {
            write_bvecs(dir.path("x.bvecs"), c.stored);
            check_read(dir.path("x.bvecs"), c);
        }
    }
    // float32 stays a Matrix, and other types are read as read_vectors reads them.
    const Matrix x = random_points(100, 9, rng);
    write_vectors(dir.path("f.npy"), x);
    write_vectors(dir.path("f.h5"), x);
    for (const std::string path : {dir.path("f.npy"), dir.path("f.h5")}) {
        PointSet read = read_stored_points(path);
        CHECK(read.type() == StoredType::f32);
        CHECK(read.floats().data == x.data);
    }
    // A .bvecs row whose dimension differs is named.
    const StoredCase c = stored_mixture(StoredType::u8, 5, 4, rng);
    write_bvecs(dir.path("bad.bvecs"), c.stored);
    std::string bytes = read_file(dir.path("bad.bvecs"));
    bytes[3 * 8] = 5;
    write_file(dir.path("bad.bvecs"), bytes);
    CHECK_THROWS_WITH(read_stored_points(dir.path("bad.bvecs")), Catch::Contains("row 3 has dimension 5"));
}

TEST_CASE("stored float16 values that are not finite are named by row and column", "[points][io]") {
    std::mt19937_64 rng(seed());
    StoredCase c = stored_mixture(StoredType::f16, 40, 6, rng);
    const std::uint16_t nan = 0x7e00;
    std::memcpy(static_cast<char*>(c.stored.values()) + 2 * (17 * 6 + 4), &nan, 2);
    CHECK_THROWS_WITH(check_finite(c.stored.view(), "x.npy"),
                      Catch::Contains("x.npy: row 17 (0-based), column 4 (0-based) is NaN"));
    CHECK_THROWS_WITH(check_accepted_range(c.stored.view(), "x.npy"),
                      Catch::Contains("row 17 (0-based), column 4 (0-based) is nan"));
    ScratchDir dir;
    write_stored_npy(dir.path("x.npy"), c.stored);
    CHECK_THROWS_WITH(load_stored_points(dir.path("x.npy"), {}, Metric::l2),
                      Catch::Contains("row 17 (0-based), column 4 (0-based) is NaN"));
    // 8-bit values are always finite; their largest is found without a float32 copy.
    const StoredCase u = stored_mixture(StoredType::u8, 40, 6, rng);
    CHECK_NOTHROW(check_finite(u.stored.view(), "u.u8bin"));
    CHECK(largest_magnitude(u.stored.view()) == largest_magnitude(u.values));
    CHECK(check_accepted_range(u.stored.view(), "u.u8bin") == largest_magnitude(u.values));
}

TEST_CASE("holds_exactly of stored points agrees with rounding their values", "[points]") {
    std::mt19937_64 rng(seed());
    for (const StoredType type : {StoredType::f16, StoredType::u8, StoredType::i8}) {
        const StoredCase c = stored_mixture(type, 500, 11, rng);
        for (const PointStorage storage : {PointStorage::f32, PointStorage::f16, PointStorage::bf16}) {
            INFO(stored_type_name(type) << " under " << storage_name(storage));
            const PointFormat format = point_format(c.values, storage);
            CHECK(point_format(c.stored.view(), storage).exponent == format.exponent);
            CHECK(holds_exactly(c.stored.view(), format) == holds_exactly(c.values, format));
        }
    }
    // float16 values large enough that the format scales them down: the least loses its bit.
    PointSet wide = PointSet::unset(StoredType::f16, 1, 2);
    const std::uint16_t values[2] = {float_to_half(60000.0f), 0x0001};  // and float16's least subnormal
    std::memcpy(wide.values(), values, sizeof values);
    const Matrix floats = wide.view().widened();
    const PointFormat format = point_format(floats, PointStorage::f16);
    REQUIRE(format.exponent < 0);
    CHECK_FALSE(holds_exactly(wide.view(), format));
    CHECK_FALSE(holds_exactly(floats, format));
}

TEST_CASE("a fit of stored points equals the fit of their float32 values", "[points][anneal]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const StoredType type = GENERATE(StoredType::f16, StoredType::u8, StoredType::i8);
    const PointStorage storage = GENERATE(PointStorage::f32, PointStorage::f16, PointStorage::bf16);
    // d = 8 takes the direct scans and the bounds, d = 24 the GEMM.
    const std::size_t d = GENERATE(std::size_t{8}, std::size_t{24});
    INFO(stored_type_name(type) << " under " << storage_name(storage) << ", d " << d);
    const StoredCase c = stored_mixture(type, 3001, d, rng);
    AnnealConfig config;
    config.anchors = 24;
    config.max_iters = 12;
    config.maintenance_every = 4;
    config.seed = run_seed;
    config.storage = storage;
    config.validate_every = 5;
    auto cpu = make_cpu_backend(2);
    const FitResult stored = fit(c.stored.view(), config, *cpu);
    const FitResult values = fit(c.values, config, *cpu);
    check_same_fit(stored, values);
    CHECK(cpu_energy(c.stored.view(), stored.anchors, stored.assignments) ==
          cpu_energy(c.values, values.anchors, values.assignments));
}

TEST_CASE("k-means++ picks the same anchors from stored points", "[points][init]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    for (const StoredType type : {StoredType::f16, StoredType::u8, StoredType::i8}) {
        const StoredCase c = stored_mixture(type, 2000, 13, rng);
        // A sample of the rows, and all of them.
        for (const std::size_t sample : {std::size_t{300}, std::size_t{5000}}) {
            CHECK(kmeans_plus_plus(c.stored.view(), 40, sample, run_seed).data ==
                  kmeans_plus_plus(c.values, 40, sample, run_seed).data);
        }
    }
}

TEST_CASE("stored points code as their float32 values do, a tile at a time", "[points][codes]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const StoredCase c = stored_mixture(StoredType::u8, 2500, 16, rng);
    AnnealConfig config;
    config.anchors = 20;
    config.max_iters = 8;
    config.seed = run_seed;
    auto cpu = make_cpu_backend(2);
    const FitResult result = fit(c.values, config, *cpu);
    const RunInput input{"x", c.values.rows, c.values.cols, Metric::l2};
    CodingSpec spec;
    spec.scalar_bits = 4;
    TrainedCoding stored_coding;
    TrainedCoding values_coding;
    const VlatFile stored_model = train_model(c.stored.view(), result, input, AnchorStorage::f16, spec, *cpu,
                                              nlohmann::json::object(), stored_coding);
    const VlatFile values_model =
        train_model(c.values, result, input, AnchorStorage::f16, spec, *cpu, nlohmann::json::object(), values_coding);
    REQUIRE(stored_model.residuals.offset.data == values_model.residuals.offset.data);
    REQUIRE(stored_model.residuals.step.data == values_model.residuals.step.data);
    // Tiles of 333 rows, so the last is short.
    const VlatFile stored = encode_with_model(stored_model, c.stored.view(), *cpu, "{}", nullptr, nullptr, {}, 333);
    const VlatFile values = encode_with_model(values_model, c.values, *cpu, "{}");
    CHECK(stored.assignments == values.assignments);
    CHECK(stored.residuals.codes == values.residuals.codes);
    CHECK(reconstruction_mse(stored, c.stored.view()) == reconstruction_mse(values, c.values));
    CHECK(nearest_anchors(c.stored.view(), values_model.anchors, *cpu, {}, 700) ==
          nearest_anchors(c.values, values_model.anchors, *cpu));
    // With the ids known and no residual code, the ids are the code.
    const VlatFile ids_model = make_model(result.anchors, AnchorStorage::f32, Metric::l2, TrainedCoding{}, "{}");
    const VlatFile ids = encode_with_model(ids_model, c.stored.view(), *cpu, "{}", nullptr, &result.assignments);
    CHECK(ids.assignments == result.assignments);
    CHECK(ids.n == c.values.rows);
}

TEST_CASE("compress of a uint8 file writes what compress of its float32 values writes", "[points][cli]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const StoredCase c = stored_mixture(StoredType::u8, 4000, 12, rng);
    ScratchDir dir;
    run_command("mkdir " + quote(dir.path("a")) + " " + quote(dir.path("b")));
    write_bigann(dir.path("a/x.u8bin"), c.stored);
    write_vectors(dir.path("b/x.fbin"), c.values);
    for (const std::string options : {std::string("--bits 4"), std::string("--target-bytes 8 --storage f16")}) {
        INFO(options);
        const std::string common = " -m 32 --iters 8 --quiet --device cpu --threads 2 --seed " +
                                   std::to_string(run_seed % 100000) + " " + options;
        REQUIRE(run_cli("compress " + quote(dir.path("a/x.u8bin")) + " -o " + quote(dir.path("a/x.vlat")) + common)
                    .exit_code == 0);
        REQUIRE(run_cli("compress " + quote(dir.path("b/x.fbin")) + " -o " + quote(dir.path("b/x.vlat")) + common)
                    .exit_code == 0);
        // The metadata names the input file, whose extension differs: everything else must agree.
        const VlatFile stored = read_vlat(dir.path("a/x.vlat"));
        const VlatFile values = read_vlat(dir.path("b/x.vlat"));
        CHECK(nlohmann::json::parse(stored.metadata_json)["residuals"] ==
              nlohmann::json::parse(values.metadata_json)["residuals"]);
        CHECK(nlohmann::json::parse(stored.metadata_json)["energy"] ==
              nlohmann::json::parse(values.metadata_json)["energy"]);
        CHECK(read_vlat(dir.path("a/x.vlat")).assignments == read_vlat(dir.path("b/x.vlat")).assignments);
        CHECK(reconstruct(read_vlat(dir.path("a/x.vlat"))).data == reconstruct(read_vlat(dir.path("b/x.vlat"))).data);
    }
}
