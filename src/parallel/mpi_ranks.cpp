#include "vlattice/collective.hpp"
#include "vlattice/types.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <vector>

namespace vlattice {

namespace {

std::string beside_executable(const char* name) {
    std::vector<char> path(4096);
    const ssize_t length = ::readlink("/proc/self/exe", path.data(), path.size() - 1);
    if (length <= 0) {
        return name;
    }
    const std::string executable(path.data(), static_cast<std::size_t>(length));
    const std::size_t slash = executable.rfind('/');
    return (slash == std::string::npos ? std::string() : executable.substr(0, slash + 1)) + name;
}

// The first of `variables` that holds a whole number in [0, 2^30), else `otherwise`.
int number_from(std::initializer_list<const char*> variables, int otherwise) {
    for (const char* variable : variables) {
        if (const char* value = std::getenv(variable)) {
            char* end = nullptr;
            const long number = std::strtol(value, &end, 10);
            if (end != value && *end == '\0' && number >= 0 && number < (1L << 30)) {
                return static_cast<int>(number);
            }
        }
    }
    return otherwise;
}

}  // namespace

bool started_by_mpi() {
    for (const char* variable : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
        if (std::getenv(variable) != nullptr) {
            return true;
        }
    }
    return false;
}

// Open MPI's, Slurm's, MPICH's (Hydra) and PMIx's names.
int local_rank() {
    return number_from({"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID", "PMIX_LOCAL_RANK"}, 0);
}

int local_size() {
    return std::max(1, number_from({"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "PMIX_LOCAL_SIZE"}, 1));
}

std::unique_ptr<Collective> start_mpi_ranks() {
    const char* named = std::getenv("VLATTICE_MPI_PLUGIN");
    // Beside the executable in a build tree; in lib/vlattice beside its bin/ once installed.
    std::string plugin = named != nullptr ? named : beside_executable("libvlattice_mpi.so");
    if (named == nullptr && ::access(plugin.c_str(), F_OK) != 0) {
        plugin = beside_executable("../" VLATTICE_LIBDIR "/vlattice/libvlattice_mpi.so");
    }
    // Global: Open MPI's own components, which it loads in turn, look for libmpi's symbols there.
    void* library = ::dlopen(plugin.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (library == nullptr) {
        const char* why = ::dlerror();
        throw Error("started by mpirun or srun, but the MPI plugin " + plugin + " does not load (" +
                    (why != nullptr ? why : "no reason given") +
                    "): build vlattice where MPI is installed (scripts/setup), or set VLATTICE_MPI_PLUGIN");
    }
    using Start = Collective* (*)(char*, std::size_t);
    const auto start = reinterpret_cast<Start>(::dlsym(library, "vlattice_mpi_ranks"));
    if (start == nullptr) {
        throw Error("the MPI plugin " + plugin + " has no vlattice_mpi_ranks");
    }
    char error[256] = {};
    Collective* ranks = start(error, sizeof error);
    if (ranks == nullptr) {
        throw Error("the MPI plugin " + plugin + " could not start MPI: " + error);
    }
    return std::unique_ptr<Collective>(ranks);
}

}  // namespace vlattice
