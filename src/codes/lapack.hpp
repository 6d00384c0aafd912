// The two LAPACK routines product-code training needs, as the Fortran symbols OpenBLAS exports
// (there is no LAPACKE header to rely on). Matrices are column-major; each CHARACTER argument
// takes a hidden length after the named arguments, which gfortran-built LAPACK may read.
#pragma once

#include <cblas.h>

#include <cstddef>
#include <mutex>

extern "C" {

// Eigenvalues (ascending) and, for jobz = 'V', the eigenvectors (columns of a) of a symmetric n x n
// matrix, by divide and conquer.
void dsyevd_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w, double* work,
             const int* lwork, int* iwork, const int* liwork, int* info, std::size_t jobz_length,
             std::size_t uplo_length);

// The singular value decomposition a = u diag(s) vt of an m x n matrix, by divide and conquer.
void dgesdd_(const char* jobz, const int* m, const int* n, double* a, const int* lda, double* s, double* u,
             const int* ldu, double* vt, const int* ldvt, double* work, const int* lwork, int* iwork, int* info,
             std::size_t jobz_length);
}

namespace vlattice {

// OpenBLAS built for OpenMP, as Debian's is, keeps one set of buffers for its threads, so BLAS calls
// from two host threads at once would share them. Training that may run beside another
// (train_coding's candidates on a device) holds a turn around its BLAS and LAPACK calls, which then
// run one at a time.
class BlasTurn {
public:
    BlasTurn() : lock_(mutex()) {}
    BlasTurn(const BlasTurn&) = delete;
    BlasTurn& operator=(const BlasTurn&) = delete;

private:
    static std::mutex& mutex() {
        static std::mutex blas;
        return blas;
    }
    std::lock_guard<std::mutex> lock_;
};

// Holds OpenBLAS to one thread while it lives, inside a BlasTurn. Its threaded level-2 kernels split the sums inside
// LAPACK's reductions by thread count: dsyevd gave different eigenvectors on 1 and 2 threads, and
// training must give the same codebook on any number of threads. The decompositions are of d x d
// matrices, cheap next to the products over the sample.
class SerialBlas {
public:
    SerialBlas() : threads_(openblas_get_num_threads()) { openblas_set_num_threads(1); }
    ~SerialBlas() { openblas_set_num_threads(threads_); }
    SerialBlas(const SerialBlas&) = delete;
    SerialBlas& operator=(const SerialBlas&) = delete;

private:
    int threads_;
};

}  // namespace vlattice
