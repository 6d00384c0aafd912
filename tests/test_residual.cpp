// Residual codes: the layout, the quantiser's bound, the width allocation and the budget arithmetic.
#include "reference.hpp"
#include "support.hpp"

#include "vlattice/codec.hpp"
#include "vlattice/format.hpp"
#include "vlattice/rate.hpp"
#include "vlattice/residual.hpp"

#include <catch2/catch.hpp>
#include <omp.h>

#include <cfloat>
#include <cmath>
#include <set>

using namespace vlattice;
using namespace vlattice::test;
using Catch::Contains;

namespace {

// A compressed set of x against anchors near it, each point on its nearest anchor.
VlatFile coded(const Matrix& x, std::size_t m, const std::vector<std::uint8_t>& widths, std::mt19937_64& rng) {
    VlatFile file;
    file.n = x.rows;
    file.d = static_cast<std::uint32_t>(x.cols);
    file.anchors = anchors_near(x, m, rng);
    file.assignments = reference_assign(x, file.anchors).assignment;
    file.residuals = encode_residuals(x, file.anchors, file.assignments, widths);
    file.codec = ResidualCodec::scalar;
    return file;
}

std::vector<std::uint8_t> mixed_widths(std::size_t d) {
    std::vector<std::uint8_t> widths(d);
    for (std::size_t k = 0; k < d; ++k) {
        widths[k] = static_cast<std::uint8_t>(kResidualWidths[(k * 5 + 2) % kResidualWidths.size()]);
    }
    return widths;
}

}  // namespace

TEST_CASE("the code layout groups widths widest first and never straddles a byte", "[residual]") {
    const CodeLayout layout = code_layout({2, 8, 0, 4, 2, 4, 2, 8, 2});
    CHECK(layout.code_bytes == 4);  // 16 + 8 + 8 bits
    CHECK(layout.byte == std::vector<std::uint32_t>{3, 0, 0, 2, 3, 2, 3, 1, 3});
    CHECK(layout.shift == std::vector<std::uint8_t>{0, 0, 0, 0, 2, 4, 4, 0, 6});
    for (std::size_t k = 0; k < layout.bits.size(); ++k) {
        CHECK(layout.shift[k] + layout.bits[k] <= 8);
    }
    CHECK(code_layout({0, 0}).code_bytes == 0);
    CHECK(code_layout({2}).code_bytes == 1);
    CHECK_THROWS_WITH(code_layout({4, 3}), Contains("dimension 1 is 3 bits"));
}

TEST_CASE("every decoded vector is within the quantiser's bound of the original", "[residual]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    for (const std::size_t d : {1, 3, 13, 40}) {
        const Matrix x = duplicated_points(1500, d, rng);
        std::vector<std::vector<std::uint8_t>> width_sets = {mixed_widths(d)};
        for (const unsigned w : kResidualWidths) {
            width_sets.emplace_back(d, static_cast<std::uint8_t>(w));
        }
        for (const auto& widths : width_sets) {
            INFO("d " << d << ", first width " << int(widths[0]));
            const VlatFile file = coded(x, 23, widths, rng);
            const Matrix y = reconstruct(file);
            std::size_t over = 0;
            for (std::size_t i = 0; i < x.rows; ++i) {
                const std::uint32_t a = file.assignments[i];
                double error = 0.0;
                double bound = 0.0;
                for (std::size_t k = 0; k < d; ++k) {
                    const double diff = static_cast<double>(x.row(i)[k]) - y.row(i)[k];
                    error += diff * diff;
                    const double step = file.residuals.step.row(a)[k];
                    // The half cell, plus float rounding in x - c and in the decoder's three operations.
                    const double magnitude = std::fabs(x.row(i)[k]) + std::fabs(file.anchors.row(a)[k]) +
                                             std::fabs(file.residuals.offset.row(a)[k]) + step * 256.0;
                    const double half = step / 2.0 + 4.0 * FLT_EPSILON * magnitude;
                    bound += half * half;
                }
                over += error <= bound ? 0 : 1;
            }
            CHECK(over == 0);
        }
    }
}

TEST_CASE("wider codes never reconstruct worse, and 8 bits is close", "[residual]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    const Matrix x = random_points(3000, 16, rng);
    double previous = INFINITY;
    double width0 = 0.0;
    for (const unsigned w : kResidualWidths) {
        std::mt19937_64 same(s);
        const VlatFile file = coded(x, 30, std::vector<std::uint8_t>(16, static_cast<std::uint8_t>(w)), same);
        const double mse = reconstruction_mse(file, x);
        INFO("width " << w << ": mse " << mse);
        CHECK(mse <= previous);
        CHECK(mse == Approx(mean_squared_error(reconstruct(file), x)).epsilon(1e-12));
        if (w == 0) {
            width0 = mse;
        }
        previous = mse;
    }
    // 8 bits cut each anchor's range per dimension into 256 cells, where width 0 keeps only the
    // mean: the error left is a tiny share of width 0's whatever the data's scale. (An absolute
    // limit of 1e-3 failed for seed 29, at 0.00108.)
    CHECK(previous < 1e-3 * width0);
}

TEST_CASE("the width allocation stays in budget, skips constant dimensions and ignores threads", "[residual]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    Matrix x = random_points(2000, 12, rng);
    for (std::size_t i = 0; i < x.rows; ++i) {
        x.row(i)[5] = 3.0f;  // no information: a width there buys nothing
    }
    const Matrix anchors = anchors_near(x, 20, rng);
    const std::vector<std::uint32_t> assignments = reference_assign(x, anchors).assignment;
    for (const std::size_t budget : {0, 1, 2, 7, 24, 48, 95, 200}) {
        INFO("budget " << budget << " bits");
        const std::vector<std::uint8_t> widths = allocate_widths(x, anchors, assignments, budget);
        std::size_t spent = 0;
        for (const std::uint8_t w : widths) {
            CHECK(is_residual_width(w));
            spent += w;
        }
        CHECK(spent <= budget);
        CHECK(widths[5] == 0);
        if (budget >= 8 * 11) {
            CHECK(spent == 8 * 11);  // every other dimension at 8 bits, nothing left to buy
        }
        omp_set_num_threads(1);
        const std::vector<std::uint8_t> one_thread = allocate_widths(x, anchors, assignments, budget);
        omp_set_num_threads(2);
        CHECK(one_thread == widths);
    }
}

TEST_CASE("the budget arithmetic never overshoots", "[residual]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    std::uniform_real_distribution<double> budget_of(0.0, 40.0);
    std::uniform_int_distribution<std::size_t> n_of(1, 5000);
    for (int trial = 0; trial < 2000; ++trial) {
        const double budget = budget_of(rng);
        const std::size_t n = n_of(rng);
        const std::size_t m = anchors_within(budget, n, 4096);
        INFO("budget " << budget << ", n " << n << ", m " << m);
        REQUIRE(m >= 1);
        CHECK(m <= n);
        if (m > 1) {
            CHECK(assignment_bytes_per_vector(n, m) <= budget);
        }
        const std::size_t residual = residual_bytes_within(budget, n, m, 16);
        CHECK(residual <= 16);
        if (residual > 0) {
            CHECK(assignment_bytes_per_vector(n, m) + static_cast<double>(residual) <= budget);
        }
    }
    CHECK(anchors_within(1.0, 1000, 4096) == 256);
    CHECK(anchors_within(0.1, 1000, 4096) == 1);
    CHECK(anchors_within(100.0, 300, 4096) == 300);
    CHECK_THROWS_WITH(anchors_within(-1.0, 10, 4), Contains("budget"));
}
