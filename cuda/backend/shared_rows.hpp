// The steps of a CUDA backend that holds one rank's share of the rows (make_cuda_backend with a
// RowShare), each giving what one process holding all the rows computes: the changed count and
// the energy summed over the ranks (shared_energy.hpp), k-means++ from the whole set's sample, the
// robust reduce on the host over the ranks (cpu::robust_reduce, exact, from the device's
// distances, which is the device's own reduce) and maintenance's members gathered from the ranks.
#pragma once

#include "backend/stages.hpp"
#include "points/shared_energy.hpp"

#include "vlattice/backend.hpp"
#include "vlattice/collective.hpp"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace vlattice::cuda {

class SharedRows {
public:
    explicit SharedRows(const RowShare& share) : share_(share) {}

    const RowShare& share() const { return share_; }
    // Checks that `rows` rows from the share's first are rows of the set; sizes the energy's buffers.
    void hold(std::size_t rows);
    // This rank's assign made the whole set's: the changed points and the energy of every rank.
    AssignStats assigned(AssignStats mine, const PointStage& points, cudaStream_t stream);
    // The mean distance over every rank's points, from the blocks' sums the stream last queued.
    double energy(const PointStage& points, cudaStream_t stream);
    Matrix seed(const PointView& points, std::size_t m, std::size_t sample_size, std::uint64_t seed) const;
    void reduce(Stages& stages, double trim, cudaStream_t stream) const;
    std::vector<Matrix> gather_members(const PointStage& points, std::size_t m, const std::vector<std::uint32_t>& anchors,
                                       std::size_t limit, cudaStream_t stream) const;

private:
    RowShare share_;
    SharedEnergy energy_;
};

}  // namespace vlattice::cuda
