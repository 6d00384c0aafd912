// The PCA start of product-code training (codes/pca_rotation.hpp).
#include "codes/pca_rotation.hpp"

#include "codes/eigenvalue_allocation.hpp"
#include "codes/lapack.hpp"

#include <cblas.h>

#include <algorithm>
#include <string>

namespace vlattice {

namespace {

// Rows converted to double per dsyrk: a few MiB at any d, and a fixed size, so the sum is the same
// whatever else changes.
constexpr std::size_t kChunkRows = 1024;

// Eigenvalues ascending and the eigenvectors as the rows of `matrix` (d x d, symmetric).
std::vector<double> eigen_decomposition(std::vector<double>& matrix, std::size_t d) {
    const int n = static_cast<int>(d);
    std::vector<double> values(d);
    int info = 0;
    int lwork = -1, liwork = -1;
    double work_size = 0.0;
    int iwork_size = 0;
    const SerialBlas serial;
    // Column-major, as LAPACK reads it, the row-major upper triangle is the lower one.
    dsyevd_("V", "L", &n, matrix.data(), &n, values.data(), &work_size, &lwork, &iwork_size, &liwork, &info, 1, 1);
    if (info == 0) {
        lwork = static_cast<int>(work_size);
        liwork = iwork_size;
        std::vector<double> work(static_cast<std::size_t>(lwork));
        std::vector<int> iwork(static_cast<std::size_t>(liwork));
        dsyevd_("V", "L", &n, matrix.data(), &n, values.data(), work.data(), &lwork, iwork.data(), &liwork, &info,
                1, 1);
    }
    if (info != 0) {
        throw Error("product-code training: the eigen-decomposition of the residuals' " + std::to_string(d) + " x " +
                    std::to_string(d) + " second moment failed (LAPACK dsyevd info " + std::to_string(info) + ")");
    }
    return values;
}

// sum_i r_i r_i^T over the rows r_i of `rows` (n x d), in double: d x d, row-major, both triangles.
std::vector<double> second_moment(const Matrix& rows) {
    const std::size_t d = rows.cols;
    std::vector<double> moment(d * d, 0.0);
    std::vector<double> chunk(kChunkRows * d);
    for (std::size_t start = 0; start < rows.rows; start += kChunkRows) {
        const std::size_t count = std::min(kChunkRows, rows.rows - start);
        std::copy(rows.row(start), rows.row(start) + count * d, chunk.begin());
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, static_cast<int>(d), static_cast<int>(count), 1.0,
                    chunk.data(), static_cast<int>(d), 1.0, moment.data(), static_cast<int>(d));
    }
    for (std::size_t i = 0; i < d; ++i) {
        for (std::size_t j = 0; j < i; ++j) {
            moment[i * d + j] = moment[j * d + i];
        }
    }
    return moment;
}

}  // namespace

PrincipalDirections principal_directions(const Matrix& residuals) {
    PrincipalDirections out;
    out.d = residuals.cols;
    // The second moment, not the covariance: the codes quantise r itself, not r minus its mean, so the
    // energy a direction carries is the mean of (v . r)^2.
    const BlasTurn turn;
    out.vectors = second_moment(residuals);
    out.ascending = eigen_decomposition(out.vectors, out.d);
    return out;
}

SubspaceRotation pca_rotation(const PrincipalDirections& directions, std::size_t subspaces, std::size_t most_dims) {
    const std::size_t d = directions.d;
    const std::vector<double>& ascending = directions.ascending;
    const std::vector<double>& vectors = directions.vectors;
    const double largest = ascending.back();
    std::size_t significant = 0;
    while (significant < d && ascending[d - 1 - significant] > 1e-10 * largest) {
        ++significant;
    }
    if (most_dims > 0) {
        significant = std::min(significant, most_dims);
    }
    const std::size_t p = std::max(significant, subspaces);
    std::vector<double> descending(p);
    for (std::size_t i = 0; i < p; ++i) {
        descending[i] = ascending[d - 1 - i];
    }

    SubspaceRotation start;
    start.rotation = Matrix(p, d);
    start.bounds.push_back(0);
    std::size_t row = 0;
    for (const std::vector<std::size_t>& directions : allocate_eigenvalues(descending, subspaces)) {
        for (const std::size_t i : directions) {
            const double* vector = vectors.data() + (d - 1 - i) * d;
            std::transform(vector, vector + d, start.rotation.row(row++),
                           [](double v) { return static_cast<float>(v); });
        }
        start.bounds.push_back(static_cast<std::uint32_t>(row));
    }
    return start;
}

}  // namespace vlattice
