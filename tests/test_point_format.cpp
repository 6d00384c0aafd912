// --storage and --assign-precision on the CPU: how points are rounded to a 16-bit format, that a fit
// under a 16-bit storage is the float32 fit of the rounded points, and what fast precision gives up.
#include "reference.hpp"
#include "support.hpp"

#include "vlattice/anneal.hpp"
#include "vlattice/cpu_backend.hpp"
#include "vlattice/half.hpp"
#include "vlattice/point_format.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>

using namespace vlattice;
using namespace vlattice::test;

namespace {

std::uint32_t bits_of(float value) {
    std::uint32_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    return bits;
}

Matrix one_row(std::vector<float> values) {
    Matrix x(1, values.size());
    x.data.assign(values.begin(), values.end());
    return x;
}

}  // namespace

TEST_CASE("the exponent brings the largest coordinate into [2^14, 2^15)", "[storage]") {
    CHECK(point_format(one_row({1.0f, -3.0f}), PointStorage::f16).exponent == 13);  // 3 * 2^13 = 24576
    CHECK(point_format(one_row({0.0f, 255.0f}), PointStorage::f32).exponent == 7);  // 255 * 2^7 = 32640
    CHECK(point_format(one_row({-1e-3f}), PointStorage::bf16).exponent == 24);
    CHECK(point_format(one_row({0.0f, 0.0f}), PointStorage::f16).exponent == 0);
    CHECK(point_format(one_row({1e30f}), PointStorage::f16).exponent == -60);  // clamped
    for (float largest : {1.0f, 3.5f, 255.0f, 1e-3f, 7e4f}) {
        const int e = point_format(one_row({largest, -largest / 3}), PointStorage::f16).exponent;
        const float scaled = std::ldexp(largest, e);
        CHECK(scaled >= 16384.0f);
        CHECK(scaled < 32768.0f);
    }
}

TEST_CASE("the largest magnitude is found wherever it sits; a non-finite value leaves exponent 0", "[storage]") {
    Matrix x(1, 1001);  // not a whole number of vectors
    for (std::size_t k = 0; k < x.cols; ++k) {
        x.data[k] = 0.5f + static_cast<float>(k % 7) / 16.0f;  // below 1
    }
    for (std::size_t at : {std::size_t{0}, std::size_t{8}, std::size_t{517}, std::size_t{999}, std::size_t{1000}}) {
        for (float largest : {3.0f, -3.0f, 1.0f}) {
            Matrix y = x;
            y.data[at] = largest;
            INFO("at " << at << ", value " << largest);
            CHECK(point_format(y, PointStorage::f16).exponent == 14 - std::ilogb(std::abs(largest)));
        }
    }
    for (float odd : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                      std::numeric_limits<float>::quiet_NaN()}) {
        Matrix y = x;
        y.data[517] = odd;
        CHECK(point_format(y, PointStorage::f16).exponent == 0);
    }
}

TEST_CASE("points round to the nearest value of the storage format, ties to even", "[storage]") {
    // Under exponent 0 for clarity: float16 keeps 11 significant bits, bfloat16 8.
    Matrix x = one_row({1.0f + 0x1p-11f, 1.0f + 0x3p-11f, 1.0f + 0x1p-8f, 1.0f + 0x3p-8f, 2049.0f, -1.5f});
    Matrix f16 = x;
    round_to_format(f16, {PointStorage::f16, 0});
    CHECK(f16.data == Floats{1.0f, 1.0f + 0x4p-11f, 1.0f + 0x1p-8f, 1.0f + 0x3p-8f, 2048.0f, -1.5f});
    Matrix bf16 = x;
    round_to_format(bf16, {PointStorage::bf16, 0});
    CHECK(bf16.data == Floats{1.0f, 1.0f, 1.0f, 1.0f + 0x4p-8f, 2048.0f, -1.5f});
    Matrix f32 = x;
    round_to_format(f32, {PointStorage::f32, 0});
    CHECK(f32.data == x.data);
}

TEST_CASE("rounding uses the scale, is exact in the format and idempotent", "[storage]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const Matrix x = random_points(500, 37, rng);
    for (PointStorage storage : {PointStorage::f16, PointStorage::bf16}) {
        INFO(storage_name(storage));
        const PointFormat format = point_format(x, storage);
        Matrix once = x;
        round_to_format(once, format);
        double worst = 0.0;
        for (std::size_t e = 0; e < x.data.size(); ++e) {
            const float scaled = std::ldexp(once.data[e], format.exponent);
            if (storage == PointStorage::f16) {
                CHECK(half_to_float(float_to_half(scaled)) == scaled);
            } else {
                CHECK((bits_of(scaled) & 0xffffu) == 0u);
            }
            if (x.data[e] != 0.0f) {
                worst = std::max(worst, std::abs(static_cast<double>(once.data[e]) - x.data[e]) / std::abs(x.data[e]));
            }
        }
        // Half a unit in the last place, relative, for values in the normal range of the format.
        CHECK(worst <= (storage == PointStorage::f16 ? 0x1p-11 : 0x1p-8) * 1.0000001);
        Matrix twice = once;
        round_to_format(twice, point_format(once, storage));
        CHECK(twice.data == once.data);
        // What the format holds is used as given; one value it does not hold is enough to round.
        CHECK(holds_exactly(once, point_format(once, storage)));
        CHECK_FALSE(holds_exactly(x, format));
        Matrix almost = once;
        almost.data[almost.data.size() / 2] = std::nextafter(almost.data[almost.data.size() / 2], 1e9f);
        CHECK_FALSE(holds_exactly(almost, point_format(almost, storage)));
    }
    CHECK(holds_exactly(x, point_format(x, PointStorage::f32)));
    // Pixels: whole numbers 0-255 are held by float16 and by bfloat16.
    Matrix pixels(300, 784);
    for (std::size_t e = 0; e < pixels.data.size(); ++e) {
        pixels.data[e] = static_cast<float>(rng() % 256);
    }
    CHECK(holds_exactly(pixels, point_format(pixels, PointStorage::f16)));
    CHECK(holds_exactly(pixels, point_format(pixels, PointStorage::bf16)));
}

TEST_CASE("rounding gives the software conversion's bits over float16's whole range", "[storage]") {
    // round_to_format may run a copy compiled for F16C; the test's own conversions are libgcc's.
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
    std::uniform_int_distribution<int> exponent(-30, 18);  // subnormal halves up to overflow
    Matrix x(1, 20000);
    for (float& v : x.data) {
        v = std::ldexp(mantissa(rng), exponent(rng)) * (rng() % 2 == 0 ? 1.0f : -1.0f);
    }
    for (const int e : {0, 7, -5}) {
        INFO("exponent " << e);
        Matrix rounded = x;
        round_to_format(rounded, {PointStorage::f16, e});
        std::size_t differ = 0;
        for (std::size_t k = 0; k < x.data.size(); ++k) {
            const float want = std::ldexp(half_to_float(float_to_half(std::ldexp(x.data[k], e))), -e);
            differ += bits_of(rounded.data[k]) == bits_of(want) ? 0 : 1;
        }
        CHECK(differ == 0);
    }
}

TEST_CASE("storage and precision names parse and print", "[storage]") {
    for (PointStorage s : {PointStorage::f32, PointStorage::f16, PointStorage::bf16}) {
        CHECK(parse_storage(storage_name(s)) == s);
    }
    for (AssignPrecision p : {AssignPrecision::exact, AssignPrecision::fast}) {
        CHECK(parse_precision(precision_name(p)) == p);
    }
    CHECK_THROWS_WITH(parse_storage("fp16"), Catch::Contains("--storage") && Catch::Contains("'fp16'"));
    CHECK_THROWS_WITH(parse_precision("approx"), Catch::Contains("--assign-precision"));
}

TEST_CASE("a fit under f16 storage is the float32 fit of the rounded points", "[storage][anneal]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const Matrix x = random_points(3000, 20, rng);
    AnnealConfig config;
    config.anchors = 30;
    config.max_iters = 12;
    config.seed = run_seed;
    config.storage = PointStorage::f16;
    auto backend = make_cpu_backend(2);
    const FitResult stored = fit(x, config, *backend);

    Matrix rounded = x;
    round_to_format(rounded, point_format(x, PointStorage::f16));
    CHECK(rounded.data != x.data);
    config.storage = PointStorage::f32;
    const FitResult plain = fit(rounded, config, *backend);
    CHECK(stored.anchors.data == plain.anchors.data);
    CHECK(stored.assignments == plain.assignments);
    CHECK(stored.energy == plain.energy);
    CHECK(stored.validation.recomputed_energy == plain.validation.recomputed_energy);
}

TEST_CASE("cpu: fast precision keeps the float32 argmin, within float32's window", "[storage][backend]") {
    // Far from the origin float32 loses the difference between nearby anchors, so fast and exact
    // precision part ways on some points, never by more than float32's rounding bound.
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    Matrix x = random_points(4000, 16, rng);
    for (float& v : x.data) {
        v += 3000.0f;
    }
    Matrix anchors(40, 16);
    for (std::size_t j = 0; j < anchors.rows; ++j) {
        std::copy(x.row(j * 97), x.row(j * 97) + 16, anchors.row(j));
    }
    auto fast = make_cpu_backend(1);
    fast->upload_points(x, {point_format(x, PointStorage::f32), AssignPrecision::fast});
    fast->upload_anchors(anchors);
    const AssignStats stats = fast->assign();
    const std::vector<std::uint32_t> chosen = fast->download_assignments();
    const ReferenceAssign exact = reference_assign(x, anchors);
    std::size_t differ = 0;
    for (std::size_t i = 0; i < x.rows; ++i) {
        differ += chosen[i] != exact.assignment[i] ? 1 : 0;
        const double norm = reference_squared_norm(x, i);
        // (d + 8) u of ||x||^2 + ||c||^2 for each of two distances; ||c||^2 is about ||x||^2 here.
        CHECK(reference_distance(x, i, anchors, chosen[i]) - exact.distance[i] <= 4.0 * 24 * 0x1p-24 * 2.1 * norm);
    }
    CHECK(differ > 0);
    CHECK(close(stats.energy, cpu_energy(x, anchors, chosen), 1e-12));
}
