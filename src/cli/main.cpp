// vlattice COMMAND ...: dispatch to one sub-command; everything else lives in that command's file.
#include "commands.hpp"
#include "options.hpp"
#include "process_ranks.hpp"
#include "vlattice/blas_kernels.hpp"
#include "vlattice/device.hpp"

#include <cstring>
#include <iostream>
#include <string>

namespace {

struct Command {
    const char* name;
    const char* summary;
    int (*run)(int argc, char** argv);
};

constexpr Command kCommands[] = {
    {"compress", "learn anchors and a residual code for a vector file and write a .vlat", vlattice::cli::run_compress},
    {"train", "learn what compress learns and write it as a model (a .vlat without vectors)", vlattice::cli::run_train},
    {"encode", "code vectors with a model; optionally append them to a file of the same model", vlattice::cli::run_encode},
    {"decompress", "write the vectors a .vlat stands for; with --reference, their error", vlattice::cli::run_decompress},
    {"info", "show a .vlat's header, sections, cost per vector and run metadata", vlattice::cli::run_info},
    {"query", "k nearest neighbours of query vectors in a .vlat; recall against ground truth", vlattice::cli::run_query},
    {"compare", "run the same compression on the CPU and the GPU; times, energies, agreement", vlattice::cli::run_compare},
    {"batch", "compress the `train` of many HDF5 files, evaluate on `test`, one summary", vlattice::cli::run_batch},
};

const Command* find_command(const std::string& name) {
    for (const Command& command : kCommands) {
        if (name == command.name) {
            return &command;
        }
    }
    return nullptr;
}

void print_commands(std::ostream& out) {
    out << "commands:\n";
    for (const Command& command : kCommands) {
        out << "  " << command.name << std::string(12 - std::strlen(command.name), ' ') << command.summary << '\n';
    }
}

void print_usage(std::ostream& out) {
    out << "usage: vlattice COMMAND [options]\n"
           "       vlattice help COMMAND\n"
           "       vlattice --version\n\n"
           "Compresses dense float vectors: each is stored as the id of its nearest anchor\n"
           "and a code of its residual from it.\n\n";
    print_commands(out);
    out << "\nrun 'vlattice COMMAND --help' for the options of a command\n";
}

int unknown_command(const std::string& name) {
    std::cerr << "vlattice: error: unknown command '" << name << "'\n";
    print_commands(std::cerr);
    return vlattice::cli::kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
    vlattice::restart_with_blas_kernels(argv);
    if (argc < 2) {
        print_usage(std::cerr);
        return vlattice::cli::kExitUsage;
    }
    const std::string first = argv[1];
    if (first == "--help" || first == "-h" || (first == "help" && argc == 2)) {
        print_usage(std::cout);
        return 0;
    }
    if (first == "--version") {
        const vlattice::GpuStatus gpu = vlattice::gpu_status(0);
        std::cout << "vlattice " << VLATTICE_VERSION << '\n'
                  << "OpenBLAS kernels: " << vlattice::blas_kernels() << '\n'
                  << "GPU 0: " << (gpu.usable ? "" : "none usable: ") << gpu.description << '\n';
        return 0;
    }
    if (first == "help") {
        const Command* command = find_command(argv[2]);
        if (!command) {
            return unknown_command(argv[2]);
        }
        char help_flag[] = "--help";
        char* help_argv[] = {argv[2], help_flag, nullptr};
        return command->run(2, help_argv);
    }
    const Command* command = find_command(first);
    if (!command) {
        return unknown_command(first);
    }
    // Under mpirun or srun, MPI starts before the command, which the ranks then run together.
    try {
        vlattice::cli::start_process_ranks();
    } catch (const vlattice::Error& e) {
        std::cerr << "vlattice " << first << ": error: " << e.what() << '\n';
        return vlattice::cli::kExitData;
    }
    return command->run(argc - 1, argv + 1);
}
