// plan_cpu_threads (include/vlattice/cpu_backend.hpp).
#include "vlattice/cpu_backend.hpp"

#include <cblas.h>
#include <omp.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdint>

namespace vlattice {

namespace {

// OpenBLAS's GEMM buffer (BUFFER_SIZE, 32 << 22 bytes on x86_64 and arm64): mapped for every thread
// up to the count as soon as the count is set, for those threads that have none yet.
constexpr std::uint64_t kBlasBufferBytes = std::uint64_t{128} << 20;
// What else a thread maps at the most: the 64 MiB heap glibc reserves for a thread's malloc arena,
// and its stack (8 MiB by default).
constexpr std::uint64_t kThreadBytes = std::uint64_t{64 + 8} << 20;

// The address space `threads` threads may still map. OpenBLAS mapped buffers for its own count of
// threads when it was loaded (every core, unless OPENBLAS_NUM_THREADS or OMP_NUM_THREADS says
// otherwise), and never gives them back.
std::uint64_t address_space_for(int threads) {
    const int buffered = std::max(openblas_get_num_threads(), 1);
    return static_cast<std::uint64_t>(std::max(threads - buffered, 0)) * kBlasBufferBytes +
           static_cast<std::uint64_t>(threads) * kThreadBytes;
}

// Whether `bytes` more of address space can be mapped now: reserved without memory behind it, and
// given back at once. This counts against ulimit -v exactly as OpenBLAS's buffers will.
bool address_space_free(std::uint64_t bytes) {
    void* reserved = ::mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (reserved == MAP_FAILED) {
        return false;
    }
    ::munmap(reserved, bytes);
    return true;
}

}  // namespace

CpuThreads plan_cpu_threads(int requested) {
    const int wanted = requested > 0 ? requested : std::max(omp_get_max_threads(), 1);
    const std::string asked = requested > 0 ? "--threads " + std::to_string(requested)
                                            : "OMP_NUM_THREADS=" + std::to_string(wanted);
    const int cores = std::max(omp_get_num_procs(), 1);
    CpuThreads plan{std::min(wanted, cores), ""};
    if (plan.threads < wanted) {
        plan.note = asked + " is more than the " + std::to_string(cores) + " cores this process may run on; using " +
                    std::to_string(plan.threads) + " threads";
    }
    struct rlimit limit {};
    if (::getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) {
        return plan;
    }
    int fit = plan.threads;
    while (fit > 1 && !address_space_free(address_space_for(fit))) {
        --fit;
    }
    if (fit < plan.threads) {
        plan.note = asked + ": the address-space limit (ulimit -v, " + std::to_string(limit.rlim_cur >> 20) +
                    " MiB) leaves room for " + std::to_string(fit) + (fit == 1 ? " thread" : " threads") + ", not " +
                    std::to_string(plan.threads) + "; using " + std::to_string(fit);
        plan.threads = fit;
    }
    return plan;
}

}  // namespace vlattice
