// Restarting with OpenBLAS's kernels for the CPU (include/vlattice/blas_kernels.hpp).
#include "vlattice/blas_kernels.hpp"

#include <cblas.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace vlattice {

namespace {

// The kernels a model OpenBLAS knows would get for this CPU's features, or nullptr.
const char* kernels_for_this_cpu() {
    __builtin_cpu_init();
    if (!__builtin_cpu_is("intel")) {
        return nullptr;
    }
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")) {
        return "SkylakeX";
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        return "Haswell";
    }
    return nullptr;
}

}  // namespace

void restart_with_blas_kernels(char** argv) {
    if (std::getenv("OPENBLAS_CORETYPE") != nullptr || std::strcmp(openblas_get_corename(), "Prescott") != 0) {
        return;
    }
    const char* kernels = kernels_for_this_cpu();
    if (kernels == nullptr || setenv("OPENBLAS_CORETYPE", kernels, 0) != 0) {
        return;
    }
    execv("/proc/self/exe", argv);
}

std::string blas_kernels() {
    return openblas_get_corename();
}

}  // namespace vlattice
