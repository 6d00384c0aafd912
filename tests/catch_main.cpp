#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "vlattice/blas_kernels.hpp"

int main(int argc, char** argv) {
    vlattice::restart_with_blas_kernels(argv);
    return Catch::Session().run(argc, argv);
}
