// A GPU fit with its rows split between ranks (run as threads, each with a CUDA backend of its own
// on the same GPU) is the one-process GPU fit, bit for bit, on 1, 2 and 3 ranks: the exchanges
// of the energy's block sums, k-means++'s sample rows, maintenance's members and the reduce over
// the ranks give what the device computes alone. Every test skips with a warning where no usable
// GPU is present.
#include <catch2/catch.hpp>

#ifdef VLATTICE_HAVE_CUDA

#include "gpu_usable.hpp"
#include "split_fit.hpp"

#include "vlattice/anneal.hpp"
#include "vlattice/cpu_backend.hpp"
#include "vlattice/cuda_backend.hpp"

using namespace vlattice;
using namespace vlattice::test;

TEST_CASE("cuda: a GPU fit on 1, 2 and 3 ranks is the one-process GPU fit, bit for bit", "[gpu][ranks][anneal]") {
    if (!gpu_usable()) {
        return;
    }
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    const SplitCase c = split_case(GENERATE(SplitRows::floats, SplitRows::bytes, SplitRows::repeated), run_seed);
    INFO(c.label);
    auto one = make_cuda_backend(0);
    const FitResult want = fit(c.points(), c.config, *one);
    for (const int ranks : {1, 2, 3}) {
        INFO(ranks << " ranks");
        check_same_fit(split_fit(c.points(), c.config, ranks,
                                 [](const RowShare& share) {
                                     return make_cuda_backend(0, FastKernel::automatic, kGatherFloats,
                                                              GpuKernels::automatic, 0, share);
                                 }),
                       want);
    }
    // The CPU's fit takes the same anchors and assignments (its energies add in another order).
    auto cpu = make_cpu_backend(1);
    const FitResult on_cpu = fit(c.points(), c.config, *cpu);
    CHECK(same_bits(on_cpu.anchors.data, want.anchors.data));
    CHECK(on_cpu.assignments == want.assignments);
}

#endif
