// vlattice decompress IN.vlat -o OUT: write the vectors the file stands for, and with --reference
// measure how far they are from the original.
#include "commands.hpp"
#include "options.hpp"

#include "vlattice/codec.hpp"
#include "vlattice/format.hpp"
#include "vlattice/io.hpp"
#include "vlattice/pipeline.hpp"

#include <cstdio>
#include <optional>

namespace vlattice::cli {

namespace {

const CommandHelp kHelp{
    "decompress",
    "IN.vlat -o OUT.(fvecs|npy) [--reference ORIGINAL] [options]",
    "IN.vlat",
    "Writes every vector of IN.vlat as its anchor (float32). With --reference, also\n"
    "prints the mean squared distance between the reconstruction and the original\n"
    "vectors (normalised first when the file's metric is angular); for the input the\n"
    "file was made from, that is the energy of the run (with f16 anchor storage, up\n"
    "to the anchors' rounding to half precision).",
};

struct DecompressArgs {
    std::string input;
    std::string output;
    std::string reference;
    std::string dataset;
    bool quiet = false;
};

void add_options(po::options_description& options, DecompressArgs& a) {
    options.add_options()
        ("output,o", po::value(&a.output)->required()->value_name("FILE"),
         "the .fvecs or .npy file to write; an existing file is replaced only when everything succeeds")
        ("reference", po::value(&a.reference)->value_name("ORIGINAL"),
         "the original vectors (any format compress reads): print the reconstruction's mean squared error")
        ("dataset", po::value(&a.dataset)->default_value(ReadOptions{}.dataset)->value_name("NAME"),
         "dataset to read from an HDF5 --reference")
        ("quiet", po::bool_switch(&a.quiet), "print nothing but errors and the error asked for by --reference");
}

int decompress(int argc, char** argv) {
    DecompressArgs args;
    po::options_description options("options");
    add_options(options, args);
    po::variables_map values;
    if (!parse_command_line(argc, argv, kHelp, options, values)) {
        return 0;
    }
    args.input = values["input"].as<std::string>();

    const VlatFile file = read_vlat(args.input);
    const Matrix reconstruction = reconstruct(file);
    // The reference is read and compared before anything is written, so a bad reference leaves the
    // output as it was.
    std::optional<double> mse;
    if (!args.reference.empty()) {
        ReadOptions read_options;
        read_options.dataset = args.dataset;
        const LoadedPoints original = load_points(args.reference, read_options, file.metric);
        mse = mean_squared_error(reconstruction, original.points);
    }
    write_vectors(args.output, reconstruction);

    if (!args.quiet) {
        std::printf("wrote %s: %zu x %zu\n", args.output.c_str(), reconstruction.rows, reconstruction.cols);
    }
    if (mse) {
        std::printf("reconstruction MSE: %.10g\n", *mse);
    }
    return 0;
}

}  // namespace

int run_decompress(int argc, char** argv) {
    return run_guarded(kHelp.name, [&] { return decompress(argc, argv); });
}

}  // namespace vlattice::cli
