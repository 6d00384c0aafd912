// A GPU fit with its rows split between ranks (run as threads, each with a CUDA backend of its own
// on the same GPU) is the one-process GPU fit, bit for bit, on 1, 2 and 3 ranks: the exchanges
// of the energy's block sums, k-means++'s sample rows, maintenance's members and the reduce over
// the ranks give what the device computes alone. Every test skips with a warning where no usable
// GPU is present.
#include <catch2/catch.hpp>

#ifdef VLATTICE_HAVE_CUDA

#include "gpu_usable.hpp"
#include "split_fit.hpp"
#include "stored_points.hpp"
#include "support.hpp"

#include "vlattice/anneal.hpp"
#include "vlattice/cpu_backend.hpp"
#include "vlattice/cuda_backend.hpp"

#include <algorithm>

using namespace vlattice;
using namespace vlattice::test;

TEST_CASE("cuda: a GPU fit on 1, 2 and 3 ranks is the one-process GPU fit, bit for bit", "[gpu][ranks][anneal]") {
    if (!gpu_usable()) {
        return;
    }
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    // A mixture as float32 or uint8 rows, or 30 distinct float32 rows repeated: with 40 anchors,
    // k-means++ must pick some twice, and maintenance must re-seed or merge them.
    enum class Rows { floats, bytes, repeated };
    const Rows kind = GENERATE(Rows::floats, Rows::bytes, Rows::repeated);
    const std::size_t n = 9001, d = 11;
    Matrix floats = duplicated_points(n, d, rng);
    if (kind == Rows::repeated) {
        for (std::size_t i = 30; i < n; ++i) {
            std::copy(floats.row(i % 30), floats.row(i % 30) + d, floats.row(i));
        }
    }
    const StoredCase stored = kind == Rows::bytes ? stored_mixture(StoredType::u8, n, d, rng) : StoredCase{};
    const PointView points = kind == Rows::bytes ? stored.stored.view() : PointView(floats);
    AnnealConfig config;
    config.anchors = 40;
    config.max_iters = 14;
    config.maintenance_every = 3;
    config.tolerance = 0.0;
    config.split_factor = 1.2;
    config.merge_factor = 0.9;
    config.validate_every = 2;
    config.min_gain = 0.0;
    config.init_sample = 4000;
    config.seed = run_seed;
    config.threads = 1;
    INFO((kind == Rows::bytes ? "uint8" : kind == Rows::repeated ? "30 repeated float32" : "float32") << " rows");
    auto one = make_cuda_backend(0);
    const FitResult want = fit(points, config, *one);
    for (const int ranks : {1, 2, 3}) {
        INFO(ranks << " ranks");
        check_same_fit(split_fit(points, config, ranks,
                                 [](const RowShare& share) {
                                     return make_cuda_backend(0, FastKernel::automatic, kGatherFloats,
                                                              GpuKernels::automatic, 0, share);
                                 }),
                       want);
    }
    // The CPU's fit takes the same anchors and assignments (its energies add in another order).
    auto cpu = make_cpu_backend(1);
    const FitResult on_cpu = fit(points, config, *cpu);
    CHECK(same_bits(on_cpu.anchors.data, want.anchors.data));
    CHECK(on_cpu.assignments == want.assignments);
}

#endif
