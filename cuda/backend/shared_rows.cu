#include "backend/shared_rows.hpp"

#include "cpu/robust_reduce.hpp"
#include "fit/init.hpp"
#include "parallel/row_share.hpp"

#include <string>

namespace vlattice::cuda {

void SharedRows::hold(std::size_t rows) {
    if (share_.first_row + rows > share_.total_rows) {
        throw Error("cuda backend: rows " + std::to_string(share_.first_row) + " to " +
                    std::to_string(share_.first_row + rows) + " are not rows of a set of " +
                    std::to_string(share_.total_rows));
    }
    energy_.allocate(share_);
}

AssignStats SharedRows::assigned(AssignStats mine, const PointStage& points, cudaStream_t stream) {
    std::uint64_t changed = mine.changed;
    share_.ranks->sum(&changed, 1);
    mine.changed = static_cast<std::size_t>(changed);
    mine.energy = energy(points, stream);
    return mine;
}

double SharedRows::energy(const PointStage& points, cudaStream_t stream) {
    return energy_.sum(points, share_, stream) / static_cast<double>(share_.total_rows);
}

Matrix SharedRows::seed(const PointView& points, std::size_t m, std::size_t sample_size, std::uint64_t seed) const {
    return kmeans_plus_plus(share_, points, m, sample_size, seed);
}

void SharedRows::reduce(Stages& stages, double trim, cudaStream_t stream) const {
    std::vector<double> means;
    AnchorStats stats;
    cpu::robust_reduce(stages.points.host_points(), share_.first_row, stages.points.download_assignment(stream),
                       stages.points.download_distance(stream), stages.anchors.download(stream), trim, *share_.ranks,
                       means, stats);
    stages.reduce.take(means, stats, stream);
}

std::vector<Matrix> SharedRows::gather_members(const PointStage& points, std::size_t m,
                                               const std::vector<std::uint32_t>& anchors, std::size_t limit,
                                               cudaStream_t stream) const {
    return gather_shared_members(share_, points.host_points(), points.download_assignment(stream), m, anchors, limit);
}

}  // namespace vlattice::cuda
