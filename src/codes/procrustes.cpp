// The orthogonal Procrustes rotation of OPQ (codes/procrustes.hpp).
#include "codes/procrustes.hpp"

#include "codes/lapack.hpp"

#include <cblas.h>

#include <algorithm>
#include <string>
#include <vector>

namespace vlattice {

namespace {

// Rows converted to double per dgemm: a few MiB at any width, and a fixed size, so the sum is the
// same whatever else changes.
constexpr std::size_t kChunkRows = 1024;

}  // namespace

Matrix procrustes_rotation(const Matrix& decoded, const Matrix& residuals) {
    const std::size_t p = decoded.cols;
    const std::size_t d = residuals.cols;
    const std::size_t n = residuals.rows;
    if (decoded.rows != n || p > d || p == 0) {
        throw Error("procrustes_rotation: decoded rows are " + std::to_string(decoded.rows) + " x " +
                    std::to_string(p) + ", residuals " + std::to_string(n) + " x " + std::to_string(d));
    }
    const BlasTurn turn;
    std::vector<double> a(p * d, 0.0);
    std::vector<double> z(kChunkRows * p), r(kChunkRows * d);
    for (std::size_t start = 0; start < n; start += kChunkRows) {
        const std::size_t count = std::min(kChunkRows, n - start);
        std::copy(decoded.row(start), decoded.row(start) + count * p, z.begin());
        std::copy(residuals.row(start), residuals.row(start) + count * d, r.begin());
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(p), static_cast<int>(d),
                    static_cast<int>(count), 1.0, z.data(), static_cast<int>(p), r.data(), static_cast<int>(d), 1.0,
                    a.data(), static_cast<int>(d));
    }

    // Column-major, as LAPACK reads it, the buffer holds A^T (d x p) = V S U^T: dgesdd's u is then V
    // (d x p) and its vt is U^T, and read back row-major the two buffers are V^T (p x d) and U (p x p).
    const int m = static_cast<int>(d), cols = static_cast<int>(p);
    std::vector<double> singular(p), v(d * p), u(p * p);
    std::vector<int> iwork(8 * p);
    int info = 0;
    int lwork = -1;
    double work_size = 0.0;
    const SerialBlas serial;
    dgesdd_("S", &m, &cols, a.data(), &m, singular.data(), v.data(), &m, u.data(), &cols, &work_size, &lwork,
            iwork.data(), &info, 1);
    if (info == 0) {
        lwork = static_cast<int>(work_size);
        std::vector<double> work(static_cast<std::size_t>(lwork));
        dgesdd_("S", &m, &cols, a.data(), &m, singular.data(), v.data(), &m, u.data(), &cols, work.data(), &lwork,
                iwork.data(), &info, 1);
    }
    if (info != 0) {
        throw Error("product-code training: the SVD of the " + std::to_string(p) + " x " + std::to_string(d) +
                    " Procrustes matrix failed (LAPACK dgesdd info " + std::to_string(info) + ")");
    }
    std::vector<double> rotation(p * d);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, cols, m, cols, 1.0, u.data(), cols, v.data(), m, 0.0,
                rotation.data(), m);
    Matrix out(p, d);
    std::transform(rotation.begin(), rotation.end(), out.data.begin(), [](double x) { return static_cast<float>(x); });
    return out;
}

}  // namespace vlattice
