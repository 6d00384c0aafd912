// The precondition of forming residuals (codes/residuals.hpp).
#include "codes/residuals.hpp"

namespace vlattice {

void check_residual_inputs(const Matrix& points, const Matrix& anchors, const std::vector<std::uint32_t>& assignments,
                           const std::string& caller) {
    if (anchors.cols != points.cols) {
        throw Error(caller + ": the points have " + std::to_string(points.cols) + " dimensions, the anchors " +
                    std::to_string(anchors.cols));
    }
    if (assignments.size() != points.rows) {
        throw Error(caller + ": " + std::to_string(points.rows) + " points but " + std::to_string(assignments.size()) +
                    " assignments");
    }
    for (std::size_t i = 0; i < points.rows; ++i) {
        if (assignments[i] >= anchors.rows) {
            throw Error(caller + ": point " + std::to_string(i) + " is assigned to anchor " +
                        std::to_string(assignments[i]) + ", but there are " + std::to_string(anchors.rows) +
                        " anchors");
        }
    }
}

}  // namespace vlattice
