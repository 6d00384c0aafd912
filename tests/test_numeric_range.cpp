// Numeric range: data whose squared distances would overflow float32 (or whose scale the 16-bit
// operands cannot hold) is refused with the file, the row, the column and the limit, while data at
// the edges of the accepted range fits exactly as at unit scale; a non-finite energy stops a run;
// numeric options name their range; a byte budget beyond the best coding gets the best coding.
#include "perturbed_backend.hpp"
#include "support.hpp"

#include "vlattice/anneal.hpp"
#include "vlattice/cpu_backend.hpp"
#include "vlattice/format.hpp"
#include "vlattice/io.hpp"
#include "vlattice/point_format.hpp"
#include "vlattice/rate.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cfloat>
#include <climits>
#include <cmath>
#include <filesystem>
#include <limits>

using namespace vlattice;
using namespace vlattice::test;
using Catch::Contains;

namespace {

constexpr std::uint64_t kSeed = 7;  // the tests compare fits of one data set at several scales

Matrix sample(std::size_t n = 300, std::size_t d = 8) {
    std::mt19937_64 rng(kSeed);
    return random_points(n, d, rng);
}

Matrix scaled(Matrix x, int power_of_two) {
    for (float& v : x.data) {
        v = std::ldexp(v, power_of_two);
    }
    return x;
}

AnnealConfig small_config(PointStorage storage = PointStorage::f32,
                          AssignPrecision precision = AssignPrecision::exact) {
    AnnealConfig config;
    config.anchors = 8;
    config.max_iters = 15;
    config.seed = kSeed;
    config.storage = storage;
    config.assign_precision = precision;
    config.threads = 2;
    return config;
}

FitResult fit_on_cpu(const Matrix& x, const AnnealConfig& config) {
    const auto backend = make_cpu_backend(config.threads);
    return fit(x, config, *backend);
}

CommandResult compress(const std::string& input, const std::string& output, const std::string& extra = "") {
    return run_cli("compress " + quote(input) + " -o " + quote(output) + " -m 8 --iters 10 --device cpu --threads 2 " +
                   extra);
}

nlohmann::json info_json(const std::string& vlat) {
    const CommandResult info = run_cli("info --json " + quote(vlat));
    INFO(info.output);
    REQUIRE(info.exit_code == 0);
    return nlohmann::json::parse(info.output);
}

}  // namespace

TEST_CASE("the accepted range keeps distances within float32 and the exponent inside its clamp", "[range]") {
    for (std::size_t d : {1, 2, 8, 100, 4096, 1000000}) {
        INFO("d = " << d);
        const AcceptedRange range = accepted_range(d);
        const double exact = std::sqrt(static_cast<double>(FLT_MAX) / (8.0 * static_cast<double>(d)));
        CHECK(range.largest <= exact);
        CHECK(range.largest > 0.99 * exact);  // only rounded down to the 3 digits printed
        // A point and an anchor twice as far out on the other side, in every dimension.
        CHECK(4.0 * range.largest * range.largest * static_cast<double>(d) <= FLT_MAX / 2.0);
        // Neither end of the range is clamped: its largest coordinate scales into [2^14, 2^15).
        for (double edge : {range.largest, range.smallest_scale}) {
            Matrix x(1, 2);
            x.data = {static_cast<float>(edge), -static_cast<float>(edge) / 3.0f};
            const float stored = std::ldexp(x.data[0], point_format(x, PointStorage::f16).exponent);
            CHECK(stored >= 16384.0f);
            CHECK(stored < 32768.0f);
        }
    }
    CHECK(accepted_range(8).largest == 2.3e18);
}

TEST_CASE("fit refuses values beyond the accepted range, naming the row, the column and the limit", "[range]") {
    Matrix x = sample();
    SECTION("one outlier whose square overflows float32") {
        x.row(17)[3] = 2e19f;
        CHECK_THROWS_WITH(fit_on_cpu(x, small_config()),
                          Contains("the points: row 17 (0-based), column 3 (0-based) is 2e+19") &&
                              Contains("beyond 2.3e+18") && Contains("scale the data down"));
    }
    SECTION("one outlier that overflows float16 after scaling") {
        x.row(5)[0] = -1e23f;
        CHECK_THROWS_WITH(fit_on_cpu(x, small_config(PointStorage::f16)), Contains("row 5 (0-based), column 0"));
    }
    SECTION("a NaN, for callers that did not read the points through load_points") {
        x.row(2)[7] = std::numeric_limits<float>::quiet_NaN();
        CHECK_THROWS_WITH(fit_on_cpu(x, small_config()), Contains("row 2 (0-based), column 7 (0-based) is nan"));
    }
    SECTION("data too small for the 16-bit operands, which rounded it to zero") {
        CHECK_THROWS_WITH(fit_on_cpu(scaled(x, -100), small_config(PointStorage::f16)),
                          Contains("the largest |value|") && Contains("is below 1.42e-14 (2^-46)") &&
                              Contains("scale the data up"));
    }
}

TEST_CASE("data at either edge of the accepted range fits as it does at unit scale", "[range]") {
    const Matrix x = sample();
    const AcceptedRange range = accepted_range(x.cols);
    const int top = static_cast<int>(std::floor(std::log2(range.largest / largest_magnitude(x))));
    const int bottom = -(std::ilogb(largest_magnitude(x)) - std::ilogb(range.smallest_scale));
    for (PointStorage storage : {PointStorage::f32, PointStorage::f16, PointStorage::bf16}) {
        for (AssignPrecision precision : {AssignPrecision::exact, AssignPrecision::fast}) {
            const AnnealConfig config = small_config(storage, precision);
            const FitResult unit = fit_on_cpu(x, config);
            for (int power : {top, bottom}) {
                INFO(storage_name(storage) << ", " << precision_name(precision) << ", data times 2^" << power);
                const Matrix y = scaled(x, power);
                REQUIRE(largest_magnitude(y) <= range.largest);
                REQUIRE(largest_magnitude(y) >= range.smallest_scale);
                const FitResult result = fit_on_cpu(y, config);
                CHECK(result.anchors.rows == unit.anchors.rows);
                CHECK(result.assignments == unit.assignments);
                CHECK(result.energy == Approx(std::ldexp(unit.energy, 2 * power)).epsilon(1e-12));
            }
        }
    }
}

TEST_CASE("opposite points at the largest accepted magnitude stay apart", "[range]") {
    // Every coordinate +L or -L: their squared distance, 4 L^2 d, is the largest accepted data can
    // have, and must neither overflow nor collapse the two groups into one anchor.
    const std::size_t d = 8;
    const double limit = accepted_range(d).largest;
    float largest = static_cast<float>(limit);
    if (largest > limit) {
        largest = std::nextafter(largest, 0.0f);  // the largest float within the limit
    }
    Matrix x(100, d);
    for (std::size_t i = 0; i < x.rows; ++i) {
        for (std::size_t k = 0; k < d; ++k) {
            x.row(i)[k] = i % 2 == 0 ? largest : -largest;
        }
    }
    for (AssignPrecision precision : {AssignPrecision::exact, AssignPrecision::fast}) {
        AnnealConfig config = small_config(PointStorage::f32, precision);
        config.anchors = 2;
        const FitResult result = fit_on_cpu(x, config);
        CHECK(result.anchors.rows == 2);
        CHECK(result.energy == 0.0);
    }
}

TEST_CASE("compress, query and batch refuse out-of-range data naming the file", "[range][cli]") {
    ScratchDir dir;
    const std::string out = dir.path("out.vlat");
    const auto refused = [&](const Matrix& points, const std::string& extra, std::vector<std::string> expected) {
        const std::string input = dir.path("input.npy");
        write_vectors(input, points);
        const CommandResult run = compress(input, out, extra);
        INFO(extra << ": " << run.output);
        CHECK(run.exit_code == 1);
        expected.push_back(input + ": ");
        for (const std::string& part : expected) {
            CHECK_THAT(run.output, Contains(part));
        }
        CHECK_FALSE(std::filesystem::exists(out));
    };
    const Matrix x = sample();
    Matrix outlier = x;
    outlier.row(17)[3] = 2e19f;
    refused(outlier, "", {"row 17 (0-based), column 3 (0-based) is 2e+19", "beyond 2.3e+18", "8 dimensions"});
    Matrix f16_outlier = x;
    f16_outlier.row(40)[6] = 1e23f;
    refused(f16_outlier, "--storage f16 --validate-every 1", {"row 40 (0-based), column 6 (0-based) is 1e+23"});
    Matrix constant_columns = x;
    for (std::size_t i = 0; i < x.rows; ++i) {
        constant_columns.row(i)[2] += 1e19f;
        constant_columns.row(i)[5] += 1e19f;
    }
    refused(constant_columns, "", {"row 0 (0-based), column 2 (0-based) is 1e+19"});
    refused(scaled(x, 64), "", {"scale the data down"});
    refused(scaled(x, -100), "--storage bf16", {"is below 1.42e-14 (2^-46)", "scale the data up"});
    // The angular metric scales every vector to unit length first: large values are then fine.
    const std::string angular_input = dir.path("angular.npy");
    write_vectors(angular_input, scaled(x, 100));
    const CommandResult angular = compress(angular_input, out, "--metric angular --quiet");
    INFO(angular.output);
    REQUIRE(angular.exit_code == 0);

    // Queries meet the same anchors, so they are held to the same range.
    const std::string input = dir.path("good.npy");
    write_vectors(input, x);
    REQUIRE(compress(input, out, "--quiet").exit_code == 0);
    const std::string queries = dir.path("queries.npy");
    write_vectors(queries, outlier);
    const CommandResult query = run_cli("query " + quote(out) + " --queries " + quote(queries) + " --device cpu");
    INFO(query.output);
    CHECK(query.exit_code == 1);
    CHECK_THAT(query.output, Contains(queries + ": row 17 (0-based), column 3 (0-based) is 2e+19"));

    const std::string h5 = dir.path("big.h5");
    write_vectors(h5, outlier);
    const CommandResult batch = run_cli("batch " + quote(h5) + " -o " + quote(dir.path("batch")) +
                                        " -m 8 --iters 5 --device cpu --quiet");
    INFO(batch.output);
    CHECK(batch.exit_code == 1);
    CHECK_THAT(batch.output, Contains(h5 + ": row 17 (0-based), column 3 (0-based) is 2e+19"));
    CHECK_FALSE(std::filesystem::exists(dir.path("batch/big.vlat")));
}

TEST_CASE("an energy that is not finite stops the run", "[range][anneal]") {
    const Matrix x = sample(400, 5);
    AnnealConfig config = small_config();
    config.anchors = 6;
    config.max_iters = 8;
    config.tolerance = 0.0;
    SECTION("in the loop") {
        NonFiniteEnergy faulty(make_cpu_backend(2), 2, false);
        CHECK_THROWS_WITH(fit(x, config, faulty), Contains("non-finite backend's energy after the assign of "
                                                           "iteration 2 is nan, not a finite number"));
    }
    SECTION("at the end, where the CPU's recomputation is not finite either") {
        NonFiniteEnergy faulty(make_cpu_backend(2), INT_MAX, true);
        CHECK_THROWS_WITH(fit(x, config, faulty),
                          Contains("validation failed at the end of the run: the energy is not finite"));
    }
}

TEST_CASE("numeric options name their range when the value is out of it", "[range][cli]") {
    ScratchDir dir;
    const std::string input = dir.path("points.npy");
    write_vectors(input, sample());
    const std::string vlat = dir.path("p.vlat");
    REQUIRE(compress(input, vlat, "--quiet").exit_code == 0);
    const std::string huge = "99999999999999999999";
    const auto refused = [](const std::string& arguments, const std::string& message) {
        const CommandResult run = run_cli(arguments);
        INFO(arguments << ": " << run.output);
        CHECK(run.exit_code == 2);
        CHECK_THAT(run.output, Contains(message));
    };
    const std::string compress_args = "compress " + quote(input) + " -o " + quote(dir.path("never.vlat")) + " ";
    refused(compress_args + "--iters 99999999999999",
            "--iters must be a whole number in [1, 2^31), got '99999999999999'");
    refused(compress_args + "-m " + huge, "--anchors must be a whole number in [1, 2^63), got '" + huge + "'");
    refused(compress_args + "--maintenance-every 1e3", "--maintenance-every must be a whole number in [0, 2^31)");
    refused(compress_args + "--init-sample " + huge, "--init-sample must be a whole number in [0, 2^63)");
    refused(compress_args + "--validate-every 3000000000", "--validate-every must be a whole number in [0, 2^31)");
    refused(compress_args + "--threads " + huge, "--threads must be a whole number in [0, 2^31)");
    refused(compress_args + "--gpu " + huge, "--gpu must be a whole number in [0, 2^31)");
    refused(compress_args + "--bits " + huge, "--bits must be a whole number in [0, 8], got '" + huge + "'");
    refused(compress_args + "--t0 1e400", "--t0 must be a finite number >= 0, got '1e400'");
    refused(compress_args + "--cooling nan", "--cooling must be a number in [0, 1), got 'nan'");
    refused(compress_args + "--trim-final 1", "--trim-final must be a number in [0, 1), got '1'");
    refused(compress_args + "--target-bytes 1e400", "--target-bytes must be a finite number > 0, got '1e400'");
    refused(compress_args + "--target-bytes 0", "--target-bytes must be a finite number > 0, got '0'");
    refused("batch " + quote(input) + " -o " + quote(dir.path("b")) + " --iters " + huge,
            "--iters must be a whole number in [1, 2^31)");
    refused("compare " + quote(input) + " --iters " + huge, "--iters must be a whole number in [1, 2^31)");
    const std::string query_args = "query " + quote(vlat) + " --queries " + quote(input) + " ";
    refused(query_args + "--k " + huge, "--k must be a whole number in [1, 2^63), got '" + huge + "'");
    refused(query_args + "--limit " + huge, "--limit must be a whole number in [0, 2^63)");
    refused(query_args + "--threads " + huge, "--threads must be a whole number in [0, 2^31)");
    refused(query_args + "--gpu " + huge, "--gpu must be a whole number in [0, 2^31)");
    refused("decompress " + quote(vlat) + " -o " + quote(dir.path("x.npy")) + " --gpu " + huge,
            "--gpu must be a whole number in [0, 2^31)");
}

TEST_CASE("a byte budget beyond the best coding gets 8-bit codes in every dimension", "[range][codes]") {
    // 2^64 bytes and more did not fit the size_t the budget was converted to, which gave 0 bytes.
    for (double budget : {40.0, 1e19, 18446744073709551616.0, 1e300}) {
        INFO("budget " << budget);
        CHECK(residual_bytes_within(budget, 1000, 256, 16) == 16);
    }
    CHECK(residual_bytes_within(3.5, 1000, 256, 16) == 2);
    CHECK_THROWS_WITH(residual_bytes_within(std::numeric_limits<double>::quiet_NaN(), 1000, 256, 16),
                      Contains("must be a finite number >= 0"));

    ScratchDir dir;
    const std::string input = dir.path("points.npy");
    write_vectors(input, sample());
    for (const char* budget : {"1e300", "18446744073709551616", "20"}) {
        const std::string out = dir.path("budget.vlat");
        const CommandResult run = compress(input, out, std::string("--target-bytes ") + budget);
        INFO(budget << ": " << run.output);
        REQUIRE(run.exit_code == 0);
        CHECK_THAT(run.output, Contains("bytes per vector is more than the best coding takes"));
        CHECK(info_json(out)["residual_widths"] == "8 x 8 bits");
    }
}
