// Each stage of the CUDA backend against the CPU backend and the brute-force double references, on
// random inputs of odd sizes (n not a multiple of any block size, d = 1 up to 784, m = 1 up to
// 5000, duplicate points and duplicate anchors), then whole runs of fit() on both backends. Every
// test skips with a warning where no usable GPU is present.
#include <catch2/catch.hpp>

#ifdef VLATTICE_HAVE_CUDA

#include "gpu_usable.hpp"
#include "call_order.hpp"
#include "../cuda/runtime/kernel_family.hpp"
#include "perturbed_backend.hpp"
#include "reference.hpp"
#include "stored_points.hpp"
#include "support.hpp"

#include "vlattice/anneal.hpp"
#include "vlattice/cpu_backend.hpp"
#include "vlattice/cuda_backend.hpp"
#include "vlattice/io.hpp"

#include <algorithm>
#include <cmath>
#include <array>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <tuple>

using namespace vlattice;
using namespace vlattice::test;

namespace {

void check_anchors_close(const Matrix& got, const Matrix& want) {
    REQUIRE(got.rows == want.rows);
    REQUIRE(got.cols == want.cols);
    std::size_t far = 0;
    for (std::size_t e = 0; e < got.data.size(); ++e) {
        far += close(got.data[e], want.data[e], 1e-6, 1e-6) ? 0 : 1;
    }
    CHECK(far == 0);
}

// Both backends sum the kept members exactly on the same grids (fit/exact_sums.hpp) and round the
// means and updates alike, so their anchors are the same bits. The variances add the points'
// distances, which the GPU measures in an order of its own: a distance a last bit apart can round
// to the next step of its grid, 2^-43 of the anchor's largest kept distance, and a tight anchor's
// variance (its mean distance less a nearly equal squared offset) is far smaller than that
// distance, so the difference is not small beside the variance itself (1e-12 of it failed on
// anchors of one member).
void check_stats_equal(const AnchorStats& got, const AnchorStats& want) {
    CHECK(got.count == want.count);
    CHECK(got.kept == want.kept);
    REQUIRE(got.variance.size() == want.variance.size());
    std::size_t far = 0;
    for (std::size_t j = 0; j < got.variance.size(); ++j) {
        far += close(got.variance[j], want.variance[j], 1e-6, 1e-6) ? 0 : 1;
    }
    CHECK(far == 0);
}

void check_anchors_equal(const Matrix& got, const Matrix& want) {
    REQUIRE(got.rows == want.rows);
    REQUIRE(got.cols == want.cols);
    std::size_t differ = 0;
    for (std::size_t e = 0; e < got.data.size(); ++e) {
        differ += got.data[e] == want.data[e] ? 0 : 1;
    }
    CHECK(differ == 0);
}

struct Case {
    std::size_t n, d, m;
    double trim;
};

// Points as a run with this storage holds them (rounded, as fit() rounds them), and the setup that says so.
struct Held {
    Matrix points;
    RunSetup setup;
};
Held held(Matrix x, PointStorage storage, AssignPrecision precision = AssignPrecision::exact) {
    Held h;
    h.setup = {point_format(x, storage), precision};
    round_to_format(x, h.setup.format);
    h.points = std::move(x);
    return h;
}

// Both backends on the same points and anchors: equal assignments and energies after assign.
void check_assign_matches_cpu(Backend& gpu, Backend& cpu) {
    const AssignStats gpu_stats = gpu.assign();
    const AssignStats cpu_stats = cpu.assign();
    CHECK(gpu_stats.changed == cpu_stats.changed);
    CHECK(gpu.download_assignments() == cpu.download_assignments());
    CHECK(close(gpu_stats.energy, cpu_stats.energy, 1e-12));
}

// A CPU and a CUDA backend holding the same points.
struct Both {
    std::unique_ptr<Backend> cpu;
    std::unique_ptr<Backend> gpu;
};
Both on_both(const Matrix& x, const RunSetup& setup = {}, FastKernel kernel = FastKernel::automatic,
             std::size_t gather_floats = kGatherFloats) {
    Both both{make_cpu_backend(0), make_cuda_backend(0, kernel, gather_floats)};
    both.cpu->upload_points(x, setup);
    both.gpu->upload_points(x, setup);
    return both;
}

// Each row times 10^u, u uniform in [-6, 6]: squared distances from 1e-12 to 1e12 relative, so that
// sums of them round.
Matrix spread_scales(Matrix x, std::mt19937_64& rng) {
    std::uniform_real_distribution<double> exponent(-6.0, 6.0);
    for (std::size_t i = 0; i < x.rows; ++i) {
        const auto scale = static_cast<float>(std::pow(10.0, exponent(rng)));
        std::for_each(x.row(i), x.row(i) + x.cols, [scale](float& v) { v *= scale; });
    }
    return x;
}

// An environment variable set (or, with null, unset) for one scope, then put back as it was.
class ScopedVariable {
public:
    ScopedVariable(const char* name, const char* value) : name_(name) {
        const char* before = std::getenv(name);
        had_ = before != nullptr;
        before_ = had_ ? before : "";
        set(value);
    }
    ~ScopedVariable() { set(had_ ? before_.c_str() : nullptr); }
    ScopedVariable(const ScopedVariable&) = delete;
    ScopedVariable& operator=(const ScopedVariable&) = delete;

private:
    void set(const char* value) {
        if (value != nullptr) {
            setenv(name_.c_str(), value, 1);
        } else {
            unsetenv(name_.c_str());
        }
    }
    std::string name_;
    std::string before_;
    bool had_ = false;
};

// Both backends on x with these anchors: the GPU's assign equals the CPU's and the brute-force
// double argmin.
void check_exact_assign(const Matrix& x, const Matrix& anchors, const RunSetup& setup, FastKernel kernel) {
    auto [cpu, gpu] = on_both(x, setup, kernel);
    cpu->upload_anchors(anchors);
    gpu->upload_anchors(anchors);
    check_assign_matches_cpu(*gpu, *cpu);
    CHECK(gpu->download_assignments() == reference_assign(x, anchors).assignment);
}

// One assign, robust reduce, update and assign again of shape c with this fast kernel on both
// backends: the GPU's assignments, energies, statistics and anchors equal the CPU's, and on small
// shapes the brute-force references'. The cases run both fast kernels under every storage: their
// windows of uncertainty differ, their assignments may not. Under float32 storage these points need
// three products (split), under 16-bit storage two.
void check_steps_match(const Case& c, FastKernel kernel, PointStorage storage) {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    INFO("n " << c.n << " d " << c.d << " m " << c.m << " trim " << c.trim << " kernel " << static_cast<int>(kernel)
              << " storage " << storage_name(storage));
    std::mt19937_64 rng(run_seed ^ (c.n * 1000003 + c.d * 1009 + c.m));
    const Held h = held(duplicated_points(c.n, c.d, rng), storage);
    const Matrix& x = h.points;
    const Matrix anchors = anchors_near(x, c.m, rng);
    // The brute-force references are quadratic; they check the small cases, the CPU backend all.
    const bool small = c.n * c.m * c.d <= 50'000'000;

    auto [cpu, gpu] = on_both(x, h.setup, kernel);
    cpu->upload_anchors(anchors);
    gpu->upload_anchors(anchors);

    const AssignStats cpu_assign = cpu->assign();
    const AssignStats gpu_assign = gpu->assign();
    const std::vector<std::uint32_t> assignment = gpu->download_assignments();
    CHECK(gpu_assign.changed == c.n);
    CHECK(assignment == cpu->download_assignments());
    CHECK(close(gpu_assign.energy, cpu_assign.energy, 1e-12));
    CHECK(close(gpu->energy(), cpu_assign.energy, 1e-12));
    ReferenceAssign ref;
    if (small) {
        ref = reference_assign(x, anchors);
        CHECK(assignment == ref.assignment);
        CHECK(close(gpu_assign.energy, ref.energy, 1e-12));
    }
    CHECK(gpu->assign().changed == 0);
    cpu->assign();

    cpu->robust_reduce(c.trim);
    gpu->robust_reduce(c.trim);
    const AnchorStats gpu_stats = gpu->download_stats();
    check_stats_equal(gpu_stats, cpu->download_stats());
    ReferenceReduce want;
    if (small) {
        want = reference_reduce(x, ref, c.m, c.trim);
        CHECK(gpu_stats.count == want.count);
        CHECK(gpu_stats.kept == want.kept);
    }

    const double eta = 0.6;
    cpu->update(eta);
    gpu->update(eta);
    const Matrix moved = gpu->download_anchors();
    check_anchors_equal(moved, cpu->download_anchors());
    if (small) {
        Matrix expected = anchors;
        for (std::size_t j = 0; j < c.m; ++j) {
            for (std::size_t k = 0; k < c.d && !want.mean[j].empty(); ++k) {
                const double c0 = anchors.row(j)[k];
                expected.row(j)[k] = static_cast<float>(c0 + eta * (want.mean[j][k] - c0));
            }
        }
        check_anchors_close(moved, expected);
    }

    // The moved anchors of both backends assign the points alike again.
    const AssignStats cpu_again = cpu->assign();
    const AssignStats gpu_again = gpu->assign();
    CHECK(gpu_again.changed == cpu_again.changed);
    CHECK(gpu->download_assignments() == cpu->download_assignments());
    CHECK(close(gpu_again.energy, cpu_again.energy, 1e-12));
}

}  // namespace

// The shapes, kernels and storages are split over cases so that each group runs in a
// compute-sanitizer process of its own (scripts/gpu-check): memcheck took 59 s over the twelve shapes
// on the H100, racecheck takes ten to twenty times memcheck's time on these tests, and with the split
// kernel each storage of the two largest shapes takes minutes under racecheck.
TEST_CASE("cuda: assign, robust reduce, update and energy match the CPU backend", "[gpu][backend]") {
    if (!gpu_usable()) {
        return;
    }
    // d = 128 and 200 take the point distances' 16-byte path with four and two points per step (one
    // and two slices of floats).
    const Case c = GENERATE(Case{1, 3, 1, 0.1}, Case{333, 1, 7, 0.35}, Case{333, 129, 333, 0.1},
                            Case{10007, 3, 1000, 0.1}, Case{10007, 129, 7, 0.0}, Case{10007, 128, 256, 0.1},
                            Case{333, 200, 333, 0.1}, Case{70001, 1, 7, 0.35});
    const FastKernel kernel = GENERATE(FastKernel::single, FastKernel::split);
    check_steps_match(c, kernel, GENERATE(PointStorage::f32, PointStorage::f16, PointStorage::bf16));
}

TEST_CASE("cuda: assign, robust reduce, update and energy match the CPU backend for 784 dimensions",
          "[gpu][backend]") {
    if (!gpu_usable()) {
        return;
    }
    const Case c = GENERATE(Case{10007, 784, 1000, 0.1}, Case{70001, 784, 1, 0.0});
    const FastKernel kernel = GENERATE(FastKernel::single, FastKernel::split);
    check_steps_match(c, kernel, GENERATE(PointStorage::f32, PointStorage::f16, PointStorage::bf16));
}

// Both fast kernels under every storage, a case each for the sanitizer (see above), for the two
// largest shapes.
#define KERNELS_AND_STORAGES                                                                                  \
    (FastKernel::single, PointStorage::f32), (FastKernel::single, PointStorage::f16),                        \
        (FastKernel::single, PointStorage::bf16), (FastKernel::split, PointStorage::f32),                    \
        (FastKernel::split, PointStorage::f16), (FastKernel::split, PointStorage::bf16)

// 4,200 anchors: one split of 33 tiles, which the single kernel runs in pairs of blocks, the second
// with a tile past the split's end.
TEMPLATE_TEST_CASE_SIG("cuda: assign, robust reduce, update and energy match the CPU backend for 4200 anchors",
                       "[gpu][backend]", ((FastKernel K, PointStorage S), K, S), KERNELS_AND_STORAGES) {
    if (!gpu_usable()) {
        return;
    }
    check_steps_match(Case{34000, 264, 4200, 0.1}, K, S);
}

TEMPLATE_TEST_CASE_SIG("cuda: assign, robust reduce, update and energy match the CPU backend for 5000 anchors",
                       "[gpu][backend]", ((FastKernel K, PointStorage S), K, S), KERNELS_AND_STORAGES) {
    if (!gpu_usable()) {
        return;
    }
    check_steps_match(Case{70001, 129, 5000, 0.1}, K, S);
}

#undef KERNELS_AND_STORAGES

TEST_CASE("cuda: assign is exact where the fast float distances nearly tie", "[gpu][backend][quick]") {
    if (!gpu_usable()) {
        return;
    }
    // Points on the bisector of two anchors far from the origin: float32 loses the difference, the
    // double re-scoring must still find the nearer anchor, and the lower one on an exact tie.
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const NearTie tie = near_tie(rng);
    const FastKernel kernel = GENERATE(FastKernel::single, FastKernel::split);
    const PointStorage storage = GENERATE(PointStorage::f32, PointStorage::f16);
    INFO("kernel " << static_cast<int>(kernel) << " storage " << storage_name(storage));
    const Held h = held(tie.points, storage);
    const Matrix& x = h.points;
    const Matrix& c = tie.anchors;
    auto gpu = make_cuda_backend(0, kernel);
    gpu->upload_points(x, h.setup);
    gpu->upload_anchors(c);
    gpu->assign();
    const std::vector<std::uint32_t> assignment = gpu->download_assignments();
    CHECK(assignment == reference_assign(x, c).assignment);
    auto cpu = make_cpu_backend(1);
    cpu->upload_points(x, h.setup);
    cpu->upload_anchors(c);
    cpu->assign();
    CHECK(assignment == cpu->download_assignments());
}

namespace {

// The same seeding on both backends, with sample 0 meaning every point (the driver's default is
// applied before this call).
void check_seeding_matches(const Case& c, std::size_t sample) {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed << " n " << c.n << " d " << c.d << " m " << c.m << " sample " << sample);
    std::mt19937_64 rng(run_seed ^ (c.n * 1000003 + c.d * 1009 + c.m));
    const Matrix x = duplicated_points(c.n, c.d, rng);
    auto [cpu, gpu] = on_both(x);
    const std::size_t size = sample == 0 ? c.n : sample;
    cpu->seed_anchors(x, c.m, size, run_seed);
    gpu->seed_anchors(x, c.m, size, run_seed);
    CHECK(gpu->download_anchors().data == cpu->download_anchors().data);
}

}  // namespace

// Small and large shapes are separate cases so that each runs in a compute-sanitizer process of
// its own (scripts/gpu-check): racecheck takes minutes over the large ones.
TEST_CASE("cuda: k-means++ on the device picks the CPU's anchors, bit for bit", "[gpu][backend][quick]") {
    if (!gpu_usable()) {
        return;
    }
    const Case c = GENERATE(Case{1, 3, 1, 0.0}, Case{333, 1, 7, 0.0}, Case{10007, 129, 333, 0.0});
    check_seeding_matches(c, GENERATE(as<std::size_t>{}, 0, 2048));
}

TEST_CASE("cuda: k-means++ on the device picks the CPU's anchors for 784 dimensions", "[gpu][backend][quick]") {
    if (!gpu_usable()) {
        return;
    }
    check_seeding_matches(Case{10007, 784, 1000, 0.0}, GENERATE(as<std::size_t>{}, 0, 2048));
}

TEST_CASE("cuda: k-means++ on the device picks the CPU's anchors for 70001 points", "[gpu][backend][quick]") {
    if (!gpu_usable()) {
        return;
    }
    check_seeding_matches(Case{70001, 17, 256, 0.0}, GENERATE(as<std::size_t>{}, 0, 2048));
}

TEST_CASE("cuda: k-means++ over many rows of few coordinates (a sub-space fit's shape) matches the CPU",
          "[gpu][backend][quick]") {
    if (!gpu_usable()) {
        return;
    }
    // Rows of up to 32 coordinates take a kernel of their own, one block of threads per block of
    // weights; 32,768 rows and 2,000 picks put it through many rounds over many blocks.
    check_seeding_matches(Case{40000, GENERATE(as<std::size_t>{}, 13, 32), 2000, 0.0}, 32768);
}

TEST_CASE("cuda: k-means++ on points spread over many orders of magnitude matches the CPU", "[gpu][backend][quick]") {
    if (!gpu_usable()) {
        return;
    }
    // Weights from 1e-12 to 1e12: their sums round, so the device adds them one by one in the CPU's
    // order instead of in parallel; near points of the same scale still give rounds that need not.
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const Held h = held(spread_scales(duplicated_points(5003, 16, rng), rng), PointStorage::f32);
    for (const std::size_t sample : {std::size_t{2048}, h.points.rows}) {
        INFO("sample " << sample);
        auto [cpu, gpu] = on_both(h.points, h.setup);
        cpu->seed_anchors(h.points, 300, sample, run_seed);
        gpu->seed_anchors(h.points, 300, sample, run_seed);
        CHECK(gpu->download_anchors().data == cpu->download_anchors().data);
    }
}

TEST_CASE("cuda: k-means++ with fewer distinct points than anchors still matches the CPU", "[gpu][backend][quick]") {
    if (!gpu_usable()) {
        return;
    }
    // Five distinct points: from the sixth pick on every weight is zero, and the device hands over
    // to the CPU's path, which then draws uniformly.
    Matrix x(500, 3);
    for (std::size_t i = 0; i < x.rows; ++i) {
        for (std::size_t k = 0; k < x.cols; ++k) {
            x.row(i)[k] = static_cast<float>((i % 5) * 10 + k);
        }
    }
    auto [cpu, gpu] = on_both(x);
    cpu->seed_anchors(x, 8, x.rows, 7);
    gpu->seed_anchors(x, 8, x.rows, 7);
    CHECK(gpu->download_anchors().data == cpu->download_anchors().data);
}

namespace {

// gather_members of one list and limit on both backends, compared row for row; the rows gathered.
std::size_t check_gather_matches(Backend& cpu, Backend& gpu, const std::vector<std::uint32_t>& list,
                                 std::size_t limit) {
    const std::vector<Matrix> got = gpu.gather_members(list, limit);
    const std::vector<Matrix> want = cpu.gather_members(list, limit);
    REQUIRE(got.size() == list.size());
    REQUIRE(want.size() == list.size());
    std::size_t rows = 0;
    for (std::size_t t = 0; t < list.size(); ++t) {
        INFO("anchor " << list[t]);
        CHECK(got[t].rows == want[t].rows);
        CHECK(got[t].cols == want[t].cols);
        CHECK(got[t].data == want[t].data);
        rows += want[t].rows;
    }
    return rows;
}

}  // namespace

TEST_CASE("cuda: gather_members returns the CPU's rows", "[gpu][backend][quick]") {
    if (!gpu_usable()) {
        return;
    }
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const Matrix x = duplicated_points(10007, 13, rng);
    const Matrix anchors = anchors_near(x, 7, rng);
    auto [cpu, gpu] = on_both(x);
    // Before any assign no point belongs to an anchor.
    gpu->upload_anchors(anchors);
    CHECK(gpu->gather_members({0}, 10).at(0).rows == 0);
    cpu->upload_anchors(anchors);
    cpu->assign();
    gpu->assign();
    // Each anchor alone, and lists in several orders (7 is past the anchors: no members).
    std::vector<std::vector<std::uint32_t>> lists;
    for (std::uint32_t j = 0; j < 8; ++j) {
        lists.push_back({j});
    }
    lists.push_back({6, 0, 7, 3, 1, 2, 5, 4});
    lists.push_back({2, 5});
    for (const std::vector<std::uint32_t>& list : lists) {
        for (std::size_t limit : {std::size_t{0}, std::size_t{1}, std::size_t{5}, std::size_t{4096}, x.rows}) {
            INFO("list of " << list.size() << " from anchor " << list[0] << ", limit " << limit);
            check_gather_matches(*cpu, *gpu, list, limit);
        }
    }
    CHECK_THROWS_AS(gpu->gather_members({3, 3}, 5), Error);
}

TEST_CASE("cuda: gather_members returns 784 dimensions of every member in pieces", "[gpu][backend][quick]") {
    if (!gpu_usable()) {
        return;
    }
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const Matrix x = duplicated_points(3001, 784, rng);
    const Matrix anchors = anchors_near(x, 5, rng);
    // In pieces of 1,500 rows, 3001 make three at least, so a piece's anchors start past the first;
    // in pieces of one row, every anchor with members keeps more than a piece holds, or as much, and
    // has a piece of its own.
    for (const std::size_t piece_rows : {std::size_t{1500}, std::size_t{1}}) {
        INFO("pieces of " << piece_rows << " rows");
        auto [cpu, gpu] = on_both(x, {}, FastKernel::automatic, piece_rows * x.cols);
        cpu->upload_anchors(anchors);
        gpu->upload_anchors(anchors);
        cpu->assign();
        gpu->assign();
        CHECK(check_gather_matches(*cpu, *gpu, {3, 0, 5, 4, 1, 2}, x.rows) == x.rows);
    }
}

namespace {

// Member limits for split_members: 1, 2, 256 and every member, or only every member.
enum class Limits { several, every_member };

// split_members on both backends, for every anchor of one shape and each of the limits, the GPU's
// members gathered in pieces of `gather_floats`.
void check_split_matches(std::size_t n, std::size_t d, std::size_t m, bool spread, Limits limits = Limits::several,
                         std::size_t gather_floats = kGatherFloats) {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed ^ (n * 1000003 + d * 1009 + m));
    Matrix raw = duplicated_points(n, d, rng);
    const Held h = held(spread ? spread_scales(std::move(raw), rng) : std::move(raw), PointStorage::f32);
    const Matrix& x = h.points;
    const Matrix anchors = anchors_near(x, m, rng);
    auto [cpu, gpu] = on_both(x, h.setup, FastKernel::automatic, gather_floats);
    cpu->upload_anchors(anchors);
    gpu->upload_anchors(anchors);
    cpu->assign();
    gpu->assign();
    std::vector<std::uint32_t> list(m + 1);  // the last is past the anchors: no members
    std::iota(list.begin(), list.end(), std::uint32_t{0});
    std::shuffle(list.begin(), list.end(), rng);
    const std::vector<std::size_t> member_limits =
        limits == Limits::several ? std::vector<std::size_t>{1, 2, 256, n} : std::vector<std::size_t>{n};
    for (const std::size_t limit : member_limits) {
        INFO("n " << n << " d " << d << " m " << m << " limit " << limit);
        const std::vector<MemberSplit> got = gpu->split_members(list, limit);
        const std::vector<MemberSplit> want = cpu->split_members(list, limit);
        REQUIRE(got.size() == list.size());
        REQUIRE(want.size() == list.size());
        std::size_t split = 0;
        for (std::size_t t = 0; t < list.size(); ++t) {
            INFO("anchor " << list[t]);
            CHECK(got[t].rows == want[t].rows);
            CHECK(got[t].ok == want[t].ok);
            CHECK(got[t].left == want[t].left);
            CHECK(got[t].right == want[t].right);
            CHECK(got[t].before == want[t].before);
            CHECK(got[t].after == want[t].after);
            split += want[t].ok ? 1 : 0;
        }
        // The comparison has splits to compare once two members are allowed.
        CHECK((limit < 2 ? split == 0 : split > 0));
    }
    CHECK_THROWS_WITH(gpu->split_members({0, 1, 0}, 5), Catch::Contains("split_members: anchor 0 is listed twice"));
}

}  // namespace

// One case per shape, each in a compute-sanitizer process of its own (scripts/gpu-check): under
// racecheck one shape takes minutes. Duplicated points give anchors whose sampled members may all
// be one point, which do not split.
TEST_CASE("cuda: split_members gives the CPU's 2-means, bit for bit", "[gpu][backend][quick]") {
    if (!gpu_usable()) {
        return;
    }
    // d = 13 leaves a partial group of the distance's 16 lanes.
    check_split_matches(10007, 13, 7, false);
    auto gpu = make_cuda_backend(0);
    CHECK_THROWS_AS(gpu->split_members({0}, 5), Error);
}

TEST_CASE("cuda: split_members matches the CPU for 40 anchors of 200 dimensions", "[gpu][backend][quick]") {
    if (!gpu_usable()) {
        return;
    }
    check_split_matches(3001, 200, 40, false);
}

TEST_CASE("cuda: split_members adds energies of widely spread scales in the CPU's order", "[gpu][backend][quick]") {
    if (!gpu_usable()) {
        return;
    }
    // Scales over twelve orders of magnitude: the energies' sums round, so the device adds them one
    // by one in the CPU's order (ordered_sums.cuh).
    check_split_matches(4001, 16, 6, true);
}

TEST_CASE("cuda: split_members gathers 784 dimensions of every member in pieces", "[gpu][backend][quick]") {
    if (!gpu_usable()) {
        return;
    }
    // With every member in pieces of 500 rows, 1201 points make three pieces at least, so a piece's
    // anchors start past the first, and an anchor's members (240 on average) mostly fill more than
    // one of the sums' staged chunks (125 rows at d = 784). The smaller limits keep fewer rows than
    // one piece holds and add nothing the other shapes do not test. Under racecheck 3001 points did
    // not finish in 175 s.
    check_split_matches(1201, 784, 5, false, Limits::every_member, 500 * 784);
}

TEST_CASE("cuda: split_members reads centres too wide for shared memory where they lie", "[gpu][backend][quick]") {
    if (!gpu_usable()) {
        return;
    }
    // At d = 8,200 the kernel's centres are too wide for its copies in shared memory. The smaller
    // limits choose rows on the host as at any width; with them, racecheck of this shape did not
    // finish in 545 s.
    check_split_matches(301, 8200, 3, false, Limits::every_member);
}

TEST_CASE("cuda: split_members reads coordinate shares too wide for its stage where they lie", "[gpu][backend][quick]") {
    if (!gpu_usable()) {
        return;
    }
    // At d = 98,312 each block's share of the coordinates is too wide for its stage as well.
    check_split_matches(40, 98312, 2, false);
}

TEST_CASE("cuda: nearest_rows matches the CPU's, duplicate rows included", "[gpu][backend][quick]") {
    if (!gpu_usable()) {
        return;
    }
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    const auto [count, d] = GENERATE(std::pair<std::size_t, std::size_t>{2, 1}, std::pair<std::size_t, std::size_t>{7, 3},
                                     std::pair<std::size_t, std::size_t>{333, 129},
                                     std::pair<std::size_t, std::size_t>{1500, 784});
    INFO("rows " << count << " d " << d);
    std::mt19937_64 rng(run_seed ^ (count * 1009 + d));
    // Duplicates make exact ties at distance 0: the lower index of the copies must win.
    const Matrix rows = duplicated_points(count, d, rng);
    auto gpu = make_cuda_backend(0);
    gpu->upload_points(rows, {});
    const NearestRows got = gpu->nearest_rows(rows);
    const NearestRows want = make_cpu_backend(0)->nearest_rows(rows);
    CHECK(got.index == want.index);
    REQUIRE(got.distance.size() == want.distance.size());
    std::size_t far = 0;
    std::size_t self = 0;
    for (std::size_t r = 0; r < count; ++r) {
        far += close(got.distance[r], want.distance[r], 1e-12, 0.0) ? 0 : 1;
        self += got.index[r] == r ? 1 : 0;
    }
    CHECK(far == 0);
    CHECK(self == 0);
}

TEST_CASE("cuda: nearest_anchors of all anchors, and of some, matches nearest_rows of those rows", "[gpu][backend][quick]") {
    if (!gpu_usable()) {
        return;
    }
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    // All anchors in order go through the tensor cores' three products (float16 operands) with the
    // anchors' own columns left out, over one tile and over several with a part tile at the end;
    // under bfloat16 storage, and for any other list, through the float32 kernel.
    const auto [count, d, storage] = GENERATE(std::tuple<std::size_t, std::size_t, PointStorage>{300, 100, PointStorage::f32},
                                              std::tuple<std::size_t, std::size_t, PointStorage>{1100, 784, PointStorage::f32},
                                              std::tuple<std::size_t, std::size_t, PointStorage>{300, 100, PointStorage::bf16});
    INFO(count << " anchors, d " << d << ", storage " << storage_name(storage));
    std::mt19937_64 rng(run_seed ^ (count * 1009 + d));
    const Held h = held(duplicated_points(count, d, rng), storage);
    const Matrix& anchors = h.points;
    auto gpu = make_cuda_backend(0);
    gpu->upload_points(anchors, h.setup);
    gpu->upload_anchors(anchors);
    std::vector<std::uint32_t> all(anchors.rows);
    std::iota(all.begin(), all.end(), 0u);
    std::vector<std::uint32_t> some;
    for (std::uint32_t j = 0; j < anchors.rows; j += 3) {
        some.push_back(j);
    }
    const NearestRows cpu = make_cpu_backend(0)->nearest_rows(anchors);
    for (const auto& live : {all, some}) {
        INFO(live.size() << " listed");
        const NearestRows got = gpu->nearest_anchors(live);
        const NearestRows want = gpu->nearest_rows(select_rows(anchors, live));
        CHECK(got.index == want.index);
        CHECK(got.distance == want.distance);
        if (live.size() == count) {
            CHECK(got.index == cpu.index);
            std::size_t far = 0;
            for (std::size_t r = 0; r < count; ++r) {
                far += close(got.distance[r], cpu.distance[r], 1e-12, 0.0) ? 0 : 1;
            }
            CHECK(far == 0);
        }
    }
}

TEST_CASE("cuda: upload_anchor_rows changes only the listed rows", "[gpu][backend][quick]") {
    if (!gpu_usable()) {
        return;
    }
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const Matrix x = duplicated_points(3001, 129, rng);
    const Matrix anchors = anchors_near(x, 300, rng);
    Matrix changed = anchors_near(x, 300, rng);
    const std::vector<std::uint32_t> rows = {0, 17, 17, 151, 299};

    auto gpu = make_cuda_backend(0);
    gpu->upload_points(x, {});
    gpu->upload_anchors(anchors);
    // The points' distances to their anchors now bound the next assign; the replaced rows must not.
    gpu->assign();
    gpu->upload_anchor_rows(select_rows(changed, rows), rows);
    Matrix expected = anchors;
    for (std::uint32_t j : rows) {
        std::memcpy(expected.row(j), changed.row(j), x.cols * sizeof(float));
    }
    CHECK(gpu->download_anchors().data == expected.data);

    auto cpu = make_cpu_backend(0);
    cpu->upload_points(x, {});
    cpu->upload_anchors(anchors);
    cpu->upload_anchor_rows(select_rows(changed, rows), rows);
    const AssignStats cpu_stats = cpu->assign();
    const AssignStats gpu_stats = gpu->assign();
    CHECK(gpu->download_assignments() == cpu->download_assignments());
    CHECK(close(gpu_stats.energy, cpu_stats.energy, 1e-12));

    // A row outside the anchors is refused without touching any.
    CHECK_THROWS_AS(gpu->upload_anchor_rows(select_rows(changed, {0}), {300}), Error);
    CHECK_THROWS_AS(gpu->upload_anchor_rows(changed, {0}), Error);  // one row of values per listed row
    CHECK(gpu->download_anchors().data == expected.data);

    // download_anchor_rows hands back the listed rows, in list order.
    const std::vector<std::uint32_t> listed = {299, 17, 0, 17};
    CHECK(gpu->download_anchor_rows(listed).data == select_rows(expected, listed).data);
    CHECK_THROWS_AS(gpu->download_anchor_rows({300}), Error);

    // Every anchor replaced, their count the same: the last assign bounds nothing either.
    gpu->upload_anchors(changed);
    cpu->upload_anchors(changed);
    CHECK(gpu->assign().changed == cpu->assign().changed);
    CHECK(gpu->download_assignments() == cpu->download_assignments());
}

TEST_CASE("cuda: a new anchor count reallocates and still matches the CPU", "[gpu][backend][quick]") {
    if (!gpu_usable()) {
        return;
    }
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const Matrix x = duplicated_points(20011, 33, rng);
    auto [cpu, gpu] = on_both(x);
    for (std::size_t m : {7, 1000, 1, 129}) {
        INFO("m " << m);
        const Matrix anchors = anchors_near(x, m, rng);
        cpu->upload_anchors(anchors);
        gpu->upload_anchors(anchors);
        const AssignStats cpu_stats = cpu->assign();
        const AssignStats gpu_stats = gpu->assign();
        CHECK(gpu_stats.changed == cpu_stats.changed);
        CHECK(gpu->download_assignments() == cpu->download_assignments());
        CHECK(close(gpu_stats.energy, cpu_stats.energy, 1e-12));
        cpu->robust_reduce(0.2);
        gpu->robust_reduce(0.2);
        check_stats_equal(gpu->download_stats(), cpu->download_stats());
        // The GPU queues update without a wait: the anchors read back after one are the updated ones,
        // and the next count's upload frees the buffers under a second one still queued.
        cpu->update(0.5);
        gpu->update(0.5);
        check_anchors_equal(gpu->download_anchors(), cpu->download_anchors());
        cpu->update(0.5);
        gpu->update(0.5);
    }
}

TEST_CASE("cuda: points exact in float16 take two products and stay exact", "[gpu][backend][quick]") {
    if (!gpu_usable()) {
        return;
    }
    // Pixel-like integers under float32 storage: every point is exact in float16, so the split kernel
    // multiplies by the anchors' head and tail only.
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    Matrix x = duplicated_points(9001, 100, rng);
    for (float& v : x.data) {
        v = std::clamp(std::round(16.0f * v + 128.0f), 0.0f, 255.0f);
    }
    const Matrix anchors = anchors_near(x, 300, rng);
    const RunSetup setup{point_format(x, PointStorage::f32), AssignPrecision::exact};
    check_exact_assign(x, anchors, setup, FastKernel::split);

    // The 16-bit rows, holding the same values, are then the only copy of the points on the device:
    // the reduce, the update and the energy read them and must agree with the CPU's float32 rows.
    auto [cpu, gpu] = on_both(x, setup, FastKernel::automatic);
    cpu->upload_anchors(anchors);
    gpu->upload_anchors(anchors);
    CHECK(close(gpu->assign().energy, cpu->assign().energy, 1e-12));
    cpu->robust_reduce(0.1);
    gpu->robust_reduce(0.1);
    check_stats_equal(gpu->download_stats(), cpu->download_stats());
    cpu->update(0.6);
    gpu->update(0.6);
    check_anchors_equal(gpu->download_anchors(), cpu->download_anchors());
    CHECK(close(gpu->energy(), cpu->energy(), 1e-12));
}

TEST_CASE("cuda: points crowded by many anchors are narrowed by a split pass and stay exact", "[gpu][backend][quick]") {
    if (!gpu_usable()) {
        return;
    }
    // A quarter of the points sit near 64 anchors crowded far from the origin (||x||^2 ~ 51,000):
    // their distances (~140) spread by ~16, and one float16 product's window (single_window.cuh,
    // ~8 here) holds more than the kept four for about a third of them (1,300 in a simulation in
    // numpy), so these leave the single pass for every anchor; they are too many to re-score so
    // (1,300 x 512 x 128 anchor values) and too few for the split path over all, so the automatic
    // kernel narrows them, where the split window (~3) separates most. The rest lie in
    // well-separated clusters.
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    constexpr std::size_t n = 16000;
    constexpr std::size_t d = 128;
    constexpr std::size_t m = 512;
    constexpr std::size_t crowd = 64;
    std::normal_distribution<float> unit(0.0f, 1.0f);
    std::vector<float> base(d);
    for (float& v : base) {
        v = 20.0f + unit(rng);
    }
    Matrix anchors(m, d);
    for (std::size_t j = 0; j < m; ++j) {
        for (std::size_t k = 0; k < d; ++k) {
            anchors.row(j)[k] = j < crowd ? base[k] + unit(rng) : 10.0f * unit(rng);
        }
    }
    Matrix raw(n, d);
    std::uniform_int_distribution<std::size_t> pick(crowd, m - 1);
    for (std::size_t i = 0; i < n; ++i) {
        const bool crowded = i % 4 == 0;
        const float* center = crowded ? base.data() : anchors.row(pick(rng));
        for (std::size_t k = 0; k < d; ++k) {
            raw.row(i)[k] = center[k] + (crowded ? 0.3f : 1.0f) * unit(rng);
        }
    }
    const PointStorage storage = GENERATE(PointStorage::f32, PointStorage::f16);
    INFO("storage " << storage_name(storage));
    const Held h = held(raw, storage);
    check_exact_assign(h.points, anchors, h.setup, FastKernel::automatic);
    {
        // In batches of 256, as when all of them do not fit at once: the points that still need
        // every anchor go back into the list while later batches are still to be read.
        const ScopedVariable batches("VLATTICE_NARROW_ROWS", "256");
        check_exact_assign(h.points, anchors, h.setup, FastKernel::automatic);
    }

    // A GPU that cannot spare the narrowing's buffers (none counts as free once the points and the
    // anchors are up) takes the split pass over every point instead, as exactly.
    auto [cpu, gpu] = on_both(h.points, h.setup, FastKernel::automatic);
    cpu->upload_anchors(anchors);
    gpu->upload_anchors(anchors);
    const ScopedVariable none_free("VLATTICE_GPU_MEMORY", "0");
    check_assign_matches_cpu(*gpu, *cpu);
    CHECK(gpu->download_assignments() == reference_assign(h.points, anchors).assignment);
}

TEST_CASE("cuda: anchors beyond float16's range are still assigned exactly", "[gpu][backend][quick]") {
    if (!gpu_usable()) {
        return;
    }
    // The points set the scale; an anchor 10^6 times farther out overflows its float16 operand, and
    // the assign must then re-score every point against every anchor.
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const Matrix x = duplicated_points(3001, 24, rng);
    Matrix anchors = anchors_near(x, 40, rng);
    anchors.row(7)[3] = 1e6f * *std::max_element(x.data.begin(), x.data.end());
    const FastKernel kernel = GENERATE(FastKernel::single, FastKernel::split);
    check_exact_assign(x, anchors, {point_format(x, PointStorage::f32), AssignPrecision::exact}, kernel);
}

TEST_CASE("cuda: points not rounded to a 16-bit storage are refused", "[gpu][backend][quick]") {
    if (!gpu_usable()) {
        return;
    }
    // The 16-bit rows are the GPU's only copy of the points: unrounded points would make them
    // differ from the CPU's, so the upload says so instead.
    std::mt19937_64 rng(seed());
    const Matrix x = duplicated_points(1001, 9, rng);
    auto gpu = make_cuda_backend(0);
    CHECK_THROWS_WITH(gpu->upload_points(x, {point_format(x, PointStorage::f16), AssignPrecision::exact}),
                      Catch::Contains("round_to_format"));
    CHECK_THROWS_AS(gpu->assign(), Error);  // nothing was uploaded
    const Held h = held(x, PointStorage::f16);
    gpu->upload_points(h.points, h.setup);
    gpu->upload_anchors(anchors_near(h.points, 5, rng));
    CHECK(gpu->assign().changed == x.rows);
}

TEST_CASE("cuda: each reduce uses its own trim share", "[gpu][backend][quick]") {
    if (!gpu_usable()) {
        return;
    }
    // The reduce replays a captured graph; the share must still be the one of each call.
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const Matrix x = duplicated_points(12007, 19, rng);
    const Matrix anchors = anchors_near(x, 77, rng);
    auto [cpu, gpu] = on_both(x);
    cpu->upload_anchors(anchors);
    gpu->upload_anchors(anchors);
    check_assign_matches_cpu(*gpu, *cpu);
    for (double trim : {0.3, 0.1, 0.0, 0.25, 0.3}) {
        INFO("trim " << trim);
        cpu->robust_reduce(trim);
        gpu->robust_reduce(trim);
        check_stats_equal(gpu->download_stats(), cpu->download_stats());
    }
}

TEST_CASE("cuda: the trim keeps equal distances in point order, as the CPU does", "[gpu][backend][quick]") {
    if (!gpu_usable()) {
        return;
    }
    // Permutations of one vector lie at exactly the same distance from an anchor at the origin but
    // differ from one another, so the trimmed mean tells which of the tied points were kept. Per
    // anchor: 200 near points (0.5 v), 700 tied ones (v) and 300 far ones (2 v), shuffled; the trims
    // cut inside the tied run, which spans several of the kernel's 256-member slices.
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    constexpr std::size_t d = 8;
    std::array<float, d> v{};
    std::iota(v.begin(), v.end(), 1.0f);
    const std::array<float, 2> offsets{0.0f, 1000.0f};
    std::vector<std::vector<float>> rows;
    for (const float offset : offsets) {
        for (const auto& [count, scale] : {std::pair{200, 0.5f}, std::pair{700, 1.0f}, std::pair{300, 2.0f}}) {
            for (int r = 0; r < count; ++r) {
                std::shuffle(v.begin(), v.end(), rng);
                std::vector<float> row(d);
                for (std::size_t k = 0; k < d; ++k) {
                    row[k] = offset + scale * v[k];
                }
                rows.push_back(row);
            }
        }
    }
    std::shuffle(rows.begin(), rows.end(), rng);
    Matrix x(rows.size(), d);
    for (std::size_t i = 0; i < rows.size(); ++i) {
        std::copy(rows[i].begin(), rows[i].end(), x.row(i));
    }
    Matrix anchors(offsets.size(), d);
    for (std::size_t j = 0; j < offsets.size(); ++j) {
        std::fill(anchors.row(j), anchors.row(j) + d, offsets[j]);
    }
    for (const double trim : {0.35, 0.2, 0.5}) {
        INFO("trim " << trim);
        auto [cpu, gpu] = on_both(x);
        cpu->upload_anchors(anchors);
        gpu->upload_anchors(anchors);
        check_assign_matches_cpu(*gpu, *cpu);
        cpu->robust_reduce(trim);
        gpu->robust_reduce(trim);
        check_stats_equal(gpu->download_stats(), cpu->download_stats());
        cpu->update(1.0);
        gpu->update(1.0);
        check_anchors_equal(gpu->download_anchors(), cpu->download_anchors());
    }
}

TEST_CASE("cuda: fast precision keeps the fast argmin, within the kernel's window", "[gpu][backend][quick]") {
    if (!gpu_usable()) {
        return;
    }
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const Matrix x = random_points(20011, 64, rng, 40);
    const Matrix anchors = anchors_near(x, 500, rng);
    auto gpu = make_cuda_backend(0);
    gpu->upload_points(x, {point_format(x, PointStorage::f32), AssignPrecision::fast});
    gpu->upload_anchors(anchors);
    const AssignStats stats = gpu->assign();
    const std::vector<std::uint32_t> fast = gpu->download_assignments();
    const ReferenceAssign exact = reference_assign(x, anchors);
    double max_anchor_norm = 0.0;
    for (std::size_t j = 0; j < anchors.rows; ++j) {
        max_anchor_norm = std::max(max_anchor_norm, reference_squared_norm(anchors, j));
    }
    std::size_t equal = 0;
    std::size_t outside = 0;
    for (std::size_t i = 0; i < x.rows; ++i) {
        equal += fast[i] == exact.assignment[i] ? 1 : 0;
        const double gap = reference_distance(x, i, anchors, fast[i]) - exact.distance[i];
        // One float16 product per pair: off by under 2^-9 of the norms (2^-10 plus the accumulation).
        const double window = 2e-3 * (2.0 * reference_squared_norm(x, i) + 2.0 * max_anchor_norm);
        outside += gap <= window ? 0 : 1;
    }
    CHECK(outside == 0);
    CHECK(static_cast<double>(equal) >= 0.95 * static_cast<double>(x.rows));
    // The energy is that of the assignments it made, exactly.
    CHECK(close(stats.energy, cpu_energy(x, anchors, fast), 1e-12));
}

TEST_CASE("cuda: calls out of order are reported as errors", "[gpu][backend][quick]") {
    if (!gpu_usable()) {
        return;
    }
    auto gpu = make_cuda_backend(0);
    check_call_order(*gpu);
}

TEST_CASE("cuda: a full fit gives the CPU's anchors and assignments, bit for bit", "[gpu][anneal]") {
    if (!gpu_usable()) {
        return;
    }
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const auto shape = GENERATE(std::make_pair(std::size_t{20011}, std::size_t{32}),
                                std::make_pair(std::size_t{5003}, std::size_t{129}));
    const PointStorage storage = GENERATE(PointStorage::f32, PointStorage::f16);
    INFO("n " << shape.first << " d " << shape.second << " storage " << storage_name(storage));
    const Matrix x = duplicated_points(shape.first, shape.second, rng);
    AnnealConfig config;
    config.anchors = 100;
    config.max_iters = 30;
    config.seed = run_seed;
    config.storage = storage;

    auto cpu = make_cpu_backend(0);
    auto gpu = make_cuda_backend(0);
    const FitResult on_cpu = fit(x, config, *cpu);
    const FitResult on_gpu = fit(x, config, *gpu);
    CHECK(on_gpu.iterations > 0);
    CHECK(on_gpu.iterations == on_cpu.iterations);
    check_anchors_equal(on_gpu.anchors, on_cpu.anchors);
    CHECK(on_gpu.assignments == on_cpu.assignments);
    // The energies are added in orders of their own.
    CHECK(close(on_gpu.energy, on_cpu.energy, 1e-12));

    // The GPU's result is consistent: its assignments are the argmin over its anchors, and its energy
    // is theirs, recomputed on the CPU.
    // Under f16 storage both fits saw the rounded points, and so does this check.
    const Held h = held(x, storage);
    auto check = make_cpu_backend(0);
    check->upload_points(h.points, h.setup);
    check->upload_anchors(on_gpu.anchors);
    const AssignStats recomputed = check->assign();
    CHECK(check->download_assignments() == on_gpu.assignments);
    CHECK(close(on_gpu.energy, recomputed.energy, 1e-12));
}


// The 99 KiB of shared memory a block gets on sm_86, sm_89 and sm_120.
constexpr const char* kSmallBlockShared = "101376";

// The kernel families this GPU has (hopper where --kernel auto takes it, portable on every GPU since
// Ampere, cuda-cores on any), and portable again laid out for a block of 99 KiB.
struct FamilyCase {
    GpuKernels family;
    const char* block_shared;  // VLATTICE_BLOCK_SHARED_MEMORY, or null
    std::string label;
};
std::vector<FamilyCase> families_here() {
    std::vector<FamilyCase> cases;
    const GpuKernels fastest = cuda::fastest_kernels(0);
    if (fastest == GpuKernels::hopper) {
        cases.push_back({GpuKernels::hopper, nullptr, "hopper"});
    }
    if (fastest != GpuKernels::cuda_cores) {
        cases.push_back({GpuKernels::portable, nullptr, "portable"});
        cases.push_back({GpuKernels::portable, kSmallBlockShared, "portable within 99 KiB"});
    }
    cases.push_back({GpuKernels::cuda_cores, nullptr, "cuda-cores"});
    return cases;
}

TEST_CASE("cuda: every kernel family gives the same fit, bit for bit", "[gpu][anneal]") {
    if (!gpu_usable()) {
        return;
    }
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const PointStorage storage = GENERATE(PointStorage::f32, PointStorage::f16, PointStorage::bf16);
    // d = 48 keeps the points in shared memory; d = 300 streams them.
    const std::size_t d = GENERATE(std::size_t{48}, std::size_t{300});
    INFO("storage " << storage_name(storage) << " d " << d);
    const Matrix x = duplicated_points(20011, d, rng);
    AnnealConfig config;
    config.anchors = 150;
    config.max_iters = 20;
    config.maintenance_every = 4;
    config.seed = run_seed;
    config.storage = storage;

    const std::vector<FamilyCase> cases = families_here();
    REQUIRE(cases.size() >= 2);
    std::vector<FitResult> fits;
    for (const FamilyCase& c : cases) {
        const ScopedVariable limit("VLATTICE_BLOCK_SHARED_MEMORY", c.block_shared);
        auto gpu = make_cuda_backend(0, FastKernel::automatic, kGatherFloats, c.family);
        fits.push_back(fit(x, config, *gpu));
    }
    for (std::size_t f = 1; f < fits.size(); ++f) {
        INFO(cases[f].label << " against " << cases[0].label);
        CHECK(fits[f].iterations == fits[0].iterations);
        CHECK(fits[f].assignments == fits[0].assignments);
        CHECK(fits[f].anchors.data == fits[0].anchors.data);
        CHECK(fits[f].energy == fits[0].energy);
    }
    // And the fastest family's assignments are the CPU's argmin over its anchors.
    const Held h = held(x, storage);
    auto check = make_cpu_backend(0);
    check->upload_points(h.points, h.setup);
    check->upload_anchors(fits[0].anchors);
    check->assign();
    CHECK(check->download_assignments() == fits[0].assignments);
}

TEST_CASE("cuda: a fit of stored points equals the fit of their float32 values", "[gpu][anneal]") {
    if (!gpu_usable()) {
        return;
    }
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const StoredType type = GENERATE(StoredType::f16, StoredType::u8, StoredType::i8);
    const PointStorage storage = GENERATE(PointStorage::f32, PointStorage::f16, PointStorage::bf16);
    // 20,011 rows go up in one copy; 200,003 of 128 dimensions through the pinned staging in chunks.
    const std::size_t n = GENERATE(std::size_t{20011}, std::size_t{200003});
    INFO(stored_type_name(type) << " under " << storage_name(storage) << ", n " << n);
    const StoredCase c = stored_mixture(type, n, 128, rng);
    AnnealConfig config;
    config.anchors = 100;
    config.max_iters = 8;
    config.maintenance_every = 4;
    config.seed = run_seed;
    config.storage = storage;
    auto gpu = make_cuda_backend(0);
    const FitResult stored = fit(c.stored.view(), config, *gpu);
    const FitResult values = fit(c.values, config, *gpu);
    CHECK(stored.iterations == values.iterations);
    CHECK(stored.assignments == values.assignments);
    CHECK(stored.anchors.data == values.anchors.data);
    CHECK(stored.energy == values.energy);
}

TEST_CASE("cuda: a fit of points mapped from their file equals the fit of the held points", "[gpu][anneal]") {
    if (!gpu_usable()) {
        return;
    }
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const StoredType type = GENERATE(StoredType::f32, StoredType::f16, StoredType::u8, StoredType::i8);
    // TEXMEX rows (.fvecs, .bvecs) lie a dimension apart in their file.
    const bool texmex = GENERATE(false, true);
    if (texmex && type != StoredType::f32 && type != StoredType::u8) {
        return;
    }
    INFO(stored_type_name(type) << (texmex ? " TEXMEX" : ""));
    ScratchDir dir;
    // 200,003 rows of 128 dimensions go up through the pinned staging in chunks.
    const StoredCase c = stored_mixture(type == StoredType::f32 ? StoredType::f16 : type, 200003, 128, rng);
    const std::string path = texmex ? write_texmex_file(dir, c, type) : write_stored_file(dir, c, type);
    ReadOptions options;
    options.memory = 1u << 20;
    options.memory_given = true;
    const PointSet mapped = read_stored_points(path, options);
    REQUIRE(mapped.view().mapped());
    const PointSet held = read_stored_points(path);
    AnnealConfig config;
    config.anchors = 100;
    config.max_iters = 8;
    config.maintenance_every = 4;
    config.seed = run_seed;
    auto gpu = make_cuda_backend(0);
    check_same_fit(fit(mapped.view(), config, *gpu), fit(held.view(), config, *gpu));
}

// Streamed points: the same anchors, assignments, merges and splits as held ones, bit for bit, for
// float32 rows with tails, float16 and uint8 rows, under f32 and f16 storage, over tiles the last of
// which is partial, made from the host's rows or from the stored rows kept on the device.
TEST_CASE("cuda: a fit of points streamed through the GPU equals the fit of the held points", "[gpu][anneal]") {
    if (!gpu_usable()) {
        return;
    }
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const StoredType type = GENERATE(StoredType::f32, StoredType::f16, StoredType::u8, StoredType::i8);
    const PointStorage storage = GENERATE(PointStorage::f32, PointStorage::f16, PointStorage::bf16);
    // 100 anchors take about 80 members a tile, so most chunks of 64 span two tiles; 3,000 take
    // about 3, so a chunk spans many tiles and some tiles give an anchor none.
    const std::size_t anchors = GENERATE(100, 3000);
    const std::string source = GENERATE(as<std::string>{}, "host", "device");
    INFO(stored_type_name(type) << " under " << storage_name(storage) << ", " << anchors << " anchors, tiles from the "
                                << source);
    const std::size_t n = 50003;
    const StoredCase c = stored_mixture(type == StoredType::f32 ? StoredType::u8 : type, n, 128, rng);
    const Matrix floats = duplicated_points(n, 128, rng);
    const PointView points = type == StoredType::f32 ? PointView(floats) : c.stored.view();
    AnnealConfig config;
    config.anchors = anchors;
    config.max_iters = 8;
    config.maintenance_every = 4;
    config.seed = run_seed;
    config.storage = storage;
    auto gpu = make_cuda_backend(0);
    const FitResult held = fit(points, config, *gpu);
    CHECK(held.points_placement == "held on GPU 0");
    const ScopedVariable tiles("VLATTICE_GPU_TILE_ROWS", "8192");
    const ScopedVariable from("VLATTICE_GPU_TILE_SOURCE", source.c_str());
    auto streamed = make_cuda_backend(0);
    const FitResult tiled = fit(points, config, *streamed);
    // bfloat16 does not hold every float16 value: the fit rounds those points into a float32 copy.
    const bool rounded = type == StoredType::f16 && storage == PointStorage::bf16;
    CHECK_THAT(tiled.points_placement,
               Catch::Contains(source == "device" ? "kept on GPU 0" : "streamed from the host") &&
                   Catch::Contains("in tiles of 8192 rows") &&
                   Catch::StartsWith(rounded ? "float32" : stored_type_name(points.type())));
    check_same_fit(tiled, held);
}

TEST_CASE("cuda: a tile source the environment names wrongly is an error", "[gpu][backend][quick]") {
    if (!gpu_usable()) {
        return;
    }
    std::mt19937_64 rng(seed());
    const Matrix x = duplicated_points(1000, 16, rng);
    const ScopedVariable tiles("VLATTICE_GPU_TILE_ROWS", "256");
    const ScopedVariable wrong("VLATTICE_GPU_TILE_SOURCE", "disk");
    auto gpu = make_cuda_backend(0);
    CHECK_THROWS_WITH(gpu->upload_points(x, RunSetup{}),
                      Catch::Contains("VLATTICE_GPU_TILE_SOURCE") && Catch::Contains("'disk'"));
}

// A million rows of 128 take 256 MB held as 16-bit rows (float32 ones with tails: 768 MB), and what
// they carry 28 MB: under 192 MiB even their uint8 rows, 128 MB, leave too little for tiles of 2^17
// rows beside them, so the tiles come from the host. 8M uint8 rows held as 16-bit rows take about
// 2.5 GB with their state, as uint8 rows 1.25 GB, which leaves a 2 GiB limit tiles of about 300,000
// rows made on the GPU.
TEST_CASE("cuda: a GPU memory limit below what held points take streams them, with the same fit",
          "[gpu][anneal]") {
    if (!gpu_usable()) {
        return;
    }
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    struct Case {
        bool floats;
        std::size_t n;
        std::size_t limit;
        const char* placement;
    };
    const Case run = GENERATE(Case{false, 1000003, std::size_t{192} << 20, "uint8 rows streamed from the host"},
                              Case{true, 1000003, std::size_t{192} << 20, "float32 rows streamed from the host"},
                              Case{false, std::size_t{8} << 20, std::size_t{2} << 30, "uint8 rows kept on GPU 0"});
    INFO((run.floats ? "float32 under f32, " : "uint8 under f16, ") << run.n << " rows under " << run.limit
                                                                     << " bytes");
    const StoredCase c = run.floats ? StoredCase{} : stored_mixture(StoredType::u8, run.n, 128, rng);
    const Matrix values = run.floats ? duplicated_points(run.n, 128, rng) : Matrix();
    const PointView points = run.floats ? PointView(values) : c.stored.view();
    AnnealConfig config;
    config.anchors = 100;
    config.max_iters = 6;
    config.maintenance_every = 3;
    config.seed = run_seed;
    config.storage = run.floats ? PointStorage::f32 : PointStorage::f16;
    auto gpu = make_cuda_backend(0);
    const FitResult held = fit(points, config, *gpu);
    CHECK(held.points_placement == "held on GPU 0");
    auto limited = make_cuda_backend(0, FastKernel::automatic, kGatherFloats, GpuKernels::automatic, run.limit);
    const FitResult streamed = fit(points, config, *limited);
    CHECK_THAT(streamed.points_placement, Catch::StartsWith(run.placement));
    check_same_fit(streamed, held);
}

// Stored rows kept on the GPU must still leave the anchors an eighth of the memory. The largest limit
// below which they stop being kept there is found by halving; if the eighth is what stops them,
// the tiles just above it are well over the 2^17-row minimum, and just below it the plan streams
// from the host, where a fit still runs and equals the held one. 24M uint8 rows of 128 (3 GiB, with
// their state 3.7 GB) leave such a window; with fewer rows the 2^17-row minimum comes first.
TEST_CASE("cuda: stored rows that would crowd out the anchors stream from the host instead", "[gpu][anneal]") {
    if (!gpu_usable()) {
        return;
    }
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    const std::size_t n = std::size_t{24} << 20, d = 128;
    PointSet stored = PointSet::unset(StoredType::u8, n, d);
    auto* bytes = static_cast<std::uint8_t*>(stored.values());
    std::uint64_t state = run_seed | 1;
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint8_t centre = static_cast<std::uint8_t>(40 + 20 * (i % 8));
        for (std::size_t k = 0; k < d; k += 8) {
            state ^= state << 13, state ^= state >> 7, state ^= state << 17;
            for (std::size_t b = 0; b < 8; ++b) {
                bytes[i * d + k + b] = static_cast<std::uint8_t>(centre + ((state >> (8 * b)) & 15));
            }
        }
    }
    const PointView points = stored.view();
    const RunSetup setup{point_format(points, PointStorage::f16), AssignPrecision::exact};
    const auto placement = [&](std::size_t limit) {
        auto gpu = make_cuda_backend(0, FastKernel::automatic, kGatherFloats, GpuKernels::automatic, limit);
        gpu->upload_points(points, setup);
        return gpu->points_placement();
    };
    std::size_t host = std::size_t{3} << 30, kept = std::size_t{6} << 30;
    REQUIRE_THAT(placement(host), Catch::StartsWith("uint8 rows streamed from the host"));
    REQUIRE_THAT(placement(kept), Catch::StartsWith("uint8 rows kept on GPU 0"));
    while (kept - host > (std::size_t{1} << 20)) {
        const std::size_t middle = host + (kept - host) / 2;
        (placement(middle).find("kept on GPU 0") != std::string::npos ? kept : host) = middle;
    }
    const std::string edge = placement(kept);
    INFO("kept from " << kept << " bytes: " << edge);
    const std::size_t tile = std::stoull(edge.substr(edge.find("tiles of ") + 9));
    CHECK(tile > (std::size_t{3} << 17) / 2);
    AnnealConfig config;
    config.anchors = 64;
    config.max_iters = 3;
    config.seed = run_seed;
    config.storage = PointStorage::f16;
    auto whole = make_cuda_backend(0);
    const FitResult held = fit(points, config, *whole);
    auto limited = make_cuda_backend(0, FastKernel::automatic, kGatherFloats, GpuKernels::automatic, host);
    const FitResult streamed = fit(points, config, *limited);
    CHECK_THAT(streamed.points_placement, Catch::StartsWith("uint8 rows streamed from the host"));
    check_same_fit(streamed, held);
}

TEST_CASE("cuda: a GPU memory limit too small for the points' state is refused, naming the limit",
          "[gpu][backend][quick]") {
    if (!gpu_usable()) {
        return;
    }
    std::mt19937_64 rng(seed());
    const Matrix x = duplicated_points(100003, 16, rng);
    auto gpu = make_cuda_backend(0, FastKernel::automatic, kGatherFloats, GpuKernels::automatic, 1u << 20);
    RunSetup setup;
    CHECK_THROWS_WITH(gpu->upload_points(x, setup),
                      Catch::Contains("too little memory") && Catch::Contains("the run's limit is 1 MiB"));
}

TEST_CASE("cuda: a kernel family the environment names wrongly is an error", "[gpu][backend][quick]") {
    if (!gpu_usable()) {
        return;
    }
    const ScopedVariable wrong("VLATTICE_KERNEL", "tensor");
    CHECK_THROWS_WITH(make_cuda_backend(0), Catch::Contains("VLATTICE_KERNEL") && Catch::Contains("'tensor'"));
    // A family named outright does not read the variable.
    CHECK_NOTHROW(make_cuda_backend(0, FastKernel::automatic, kGatherFloats, GpuKernels::cuda_cores));
}

TEST_CASE("cuda: too little shared memory for the portable assign is an error that says so",
          "[gpu][backend][quick]") {
    if (!gpu_usable() || cuda::fastest_kernels(0) == GpuKernels::cuda_cores) {
        return;
    }
    {
        const ScopedVariable wrong("VLATTICE_BLOCK_SHARED_MEMORY", "99k");
        CHECK_THROWS_WITH(make_cuda_backend(0, FastKernel::automatic, kGatherFloats, GpuKernels::portable),
                          Catch::Contains("VLATTICE_BLOCK_SHARED_MEMORY") && Catch::Contains("'99k'"));
    }
    const ScopedVariable small("VLATTICE_BLOCK_SHARED_MEMORY", "40000");
    std::mt19937_64 rng(seed());
    const Matrix x = duplicated_points(3001, 64, rng);
    auto gpu = make_cuda_backend(0, FastKernel::automatic, kGatherFloats, GpuKernels::portable);
    gpu->upload_points(x, RunSetup{});
    gpu->upload_anchors(anchors_near(x, 40, rng));
    CHECK_THROWS_WITH(gpu->assign(), Catch::Contains("bytes of shared memory per block") &&
                                         Catch::Contains("this GPU gives 40000"));
}

TEST_CASE("cuda: points or anchors beyond the free GPU memory are refused, and the backend goes on",
          "[gpu][backend][quick]") {
    if (!gpu_usable()) {
        return;
    }
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const Matrix x = duplicated_points(20000, 64, rng);
    const Matrix c = anchors_near(x, 4000, rng);
    auto gpu = make_cuda_backend(0);
    {
        // 1 MB counts as free: the points alone are 5 MB.
        const ScopedVariable limit("VLATTICE_GPU_MEMORY", "1000000");
        CHECK_THROWS_WITH(gpu->upload_points(x, RunSetup{}),
                          Catch::Contains("too little memory for 20000 points of dimension 64") &&
                              Catch::Contains(", 1 MiB of"));
        CHECK_THROWS_WITH(gpu->assign(), Catch::Contains("before upload_points"));
    }
    gpu->upload_points(x, RunSetup{});
    {
        const ScopedVariable limit("VLATTICE_GPU_MEMORY", "1000000");
        CHECK_THROWS_WITH(gpu->upload_anchors(c),
                          Catch::Contains("too little memory for 4000 anchors of dimension 64 for 20000 points"));
        CHECK_THROWS_WITH(gpu->assign(), Catch::Contains("before upload_anchors"));
    }
    // Nothing of the refused anchors is left half-sized: with the memory back, the same calls work.
    gpu->upload_anchors(c);
    gpu->assign();
    auto cpu = make_cpu_backend(1);
    cpu->upload_points(x, RunSetup{});
    cpu->upload_anchors(c);
    cpu->assign();
    CHECK(gpu->download_assignments() == cpu->download_assignments());
    CHECK(gpu->energy() == Approx(cpu->energy()).epsilon(1e-12));
}

TEST_CASE("cuda: validation catches anchors that differ from the ones the energy came from", "[gpu][anneal]") {
    if (!gpu_usable()) {
        return;
    }
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const Matrix x = duplicated_points(3001, 17, rng);
    AnnealConfig config;
    config.anchors = 20;
    config.max_iters = 8;
    config.min_gain = 0.0;  // all 8 iterations run: 8 / 2 checks during the run
    config.seed = run_seed;
    config.validate_every = 2;
    auto sound = make_cuda_backend(0);
    const FitResult result = fit(x, config, *sound);
    CHECK(result.validation.checks == 8 / 2 + 1);
    CHECK(result.validation.relative_difference <= config.validation_tolerance);
    PerturbedAnchors faulty(make_cuda_backend(0));
    CHECK_THROWS_WITH(fit(x, config, faulty), Catch::Contains("validation failed at iteration 1"));
}

#else

TEST_CASE("cuda backend", "[gpu]") {
    WARN("skipped: built without CUDA");
}

#endif
