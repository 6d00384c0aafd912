// OpenBLAS's kernels on Intel CPUs newer than the OpenBLAS in use.
#pragma once

#include <string>

namespace vlattice {

// A DYNAMIC_ARCH OpenBLAS picks its kernels by the CPU's model number when it loads, and versions
// before 0.3.25 (Debian 12 ships 0.3.21) fall back to their SSE3 kernels, "Prescott", on any Intel
// model newer than they know (OpenBLAS issue #4267), Emerald Rapids among them: the sgemm of the CPU
// assign then takes three times as long, the same arithmetic otherwise. OpenBLAS reads its
// documented override, OPENBLAS_CORETYPE, only when it loads. So when it fell back on a CPU with
// AVX2 and FMA, and the variable is unset, this sets it to the kernels a model OpenBLAS knew would
// get (SkylakeX with AVX-512, else Haswell) and executes the program again from /proc/self/exe with
// the same arguments. It returns when there is nothing to do, or when the restart failed (the run
// then goes on with the slow kernels). Setting OPENBLAS_CORETYPE to any value turns it off.
void restart_with_blas_kernels(char** argv);

// The name of the kernels OpenBLAS runs ("SkylakeX", "Haswell", "Prescott", ...).
std::string blas_kernels();

}  // namespace vlattice
