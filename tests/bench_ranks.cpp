// What the exchanges of a fit over ranks cost on one GPU: the same fit of a file's vectors as one
// process (the plain CUDA backend), then on R ranks run as threads, each with a CUDA backend of
// its own holding its rank_rows share (1 rank: the exchange path alone; 2 ranks share the GPU).
// One JSON line per run on stdout: ranks, iterations, the loop's seconds per iteration (assign,
// reduce, update, maintenance, energy), each phase's, and whether the anchors and assignments are
// the plain run's, bit for bit. scripts/bench-ranks runs it on the GPU benchmark's sets.
//   bench_ranks FILE M ITERS RANKS...
#include "thread_ranks.hpp"

#include "vlattice/anneal.hpp"
#include "vlattice/collective.hpp"
#include "vlattice/cuda_backend.hpp"
#include "vlattice/io.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

using namespace vlattice;

namespace {

double loop_seconds(const PhaseSeconds& s) { return s.assign + s.reduce + s.update + s.maintenance + s.energy; }

nlohmann::json row(int ranks, const FitResult& r, const FitResult& plain) {
    const bool same = r.anchors.data.size() == plain.anchors.data.size() &&
                      std::memcmp(r.anchors.data.data(), plain.anchors.data.data(),
                                  r.anchors.data.size() * sizeof(float)) == 0 &&
                      r.assignments == plain.assignments && r.energy == plain.energy;
    const double iterations = r.iterations > 0 ? r.iterations : 1;
    return {{"ranks", ranks},
            {"iterations", r.iterations},
            {"s_per_iter", loop_seconds(r.seconds) / iterations},
            {"assign_s_per_iter", r.seconds.assign / iterations},
            {"reduce_s_per_iter", r.seconds.reduce / iterations},
            {"maintenance_s_per_iter", r.seconds.maintenance / iterations},
            {"energy_s_per_iter", r.seconds.energy / iterations},
            {"init_s", r.seconds.init},
            {"same_as_plain", same}};
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 5) {
        std::fprintf(stderr, "usage: bench_ranks FILE M ITERS RANKS...\n");
        return 2;
    }
    try {
        const Matrix x = read_vectors(argv[1]);
        AnnealConfig config;
        config.anchors = std::strtoul(argv[2], nullptr, 10);
        config.max_iters = std::atoi(argv[3]);
        config.tolerance = 0.0;  // every run does all its iterations
        auto plain_backend = make_cuda_backend(0);
        const FitResult plain = fit(x, config, *plain_backend);
        std::printf("%s\n", row(0, plain, plain).dump().c_str());
        for (int a = 4; a < argc; ++a) {
            const int ranks = std::atoi(argv[a]);
            std::vector<FitResult> results(ranks);
            test::ThreadRanks(ranks).run([&](Collective& rank) {
                const RowRange mine = rank_rows(x.rows, ranks, rank.rank());
                const PointView share_of(StoredType::f32, x.row(mine.first), mine.count, x.cols);
                auto backend = make_cuda_backend(0, FastKernel::automatic, kGatherFloats, GpuKernels::automatic, 0,
                                                 RowShare{&rank, mine.first, x.rows});
                results[rank.rank()] = fit(share_of, config, *backend);
            });
            FitResult all = results[0];
            for (int r = 1; r < ranks; ++r) {
                all.assignments.insert(all.assignments.end(), results[r].assignments.begin(),
                                       results[r].assignments.end());
            }
            std::printf("%s\n", row(ranks, all, plain).dump().c_str());
            std::fflush(stdout);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_ranks: %s\n", e.what());
        return 1;
    }
    return 0;
}
