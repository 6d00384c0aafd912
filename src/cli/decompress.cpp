// vlattice decompress IN.vlat -o OUT: write the vectors the file stands for, and with --reference
// measure how far they are from the original.
#include "activity.hpp"
#include "commands.hpp"
#include "device_note.hpp"
#include "input_files.hpp"
#include "options.hpp"

#include "vlattice/codec.hpp"
#include "vlattice/device.hpp"
#include "vlattice/format.hpp"
#include "vlattice/io.hpp"
#include "vlattice/memory.hpp"
#include "vlattice/pipeline.hpp"
#ifdef VLATTICE_HAVE_CUDA
#include "vlattice/cuda_search.hpp"
#endif

#include <cstdio>
#include <optional>
#include <string>

namespace vlattice::cli {

namespace {

const CommandHelp kHelp{
    "decompress",
    "IN.vlat -o OUT.(fvecs|npy|hdf5) [--reference ORIGINAL] [options]",
    "IN.vlat",
    "Writes every vector of IN.vlat as float32: its anchor plus its decoded residual\n"
    "when the file has residual codes (an HDF5 output holds them in dataset `train`).\n"
    "The CPU and the GPU decode to the same bits. With --reference, also prints the\n"
    "mean squared distance between the reconstruction and the original vectors\n"
    "(normalised first when the file's metric is angular); without residual codes,\n"
    "for the input the file was made from, that is the energy of the run (with f16\n"
    "anchor storage, up to the anchors' rounding to half precision).",
};

struct DecompressArgs {
    std::string input;
    std::string output;
    std::string reference;
    std::string dataset;
    std::string device;
    int gpu = 0;
    bool quiet = false;
};

void add_options(po::options_description& options, DecompressArgs& a) {
    options.add_options()
        ("output,o", po::value(&a.output)->required()->value_name("FILE"),
         "the .fvecs, .npy or .hdf5 file to write; an existing file is replaced only when everything succeeds")
        ("reference", po::value(&a.reference)->value_name("ORIGINAL"),
         "the original vectors (any format compress reads): print the reconstruction's mean squared error")
        ("dataset", po::value(&a.dataset)->default_value(ReadOptions{}.dataset)->value_name("NAME"),
         "dataset to read from an HDF5 --reference")
        ("device", po::value(&a.device)->default_value("auto")->value_name("KIND"),
         "where to decode: auto (the GPU when one is usable, else the CPU), cpu, or cuda")
        ("gpu", po::value(&a.gpu)->default_value(0)->value_name("N"), "which GPU")
        ("quiet,q", po::bool_switch(&a.quiet), "print nothing but errors and the error asked for by --reference");
}

int decompress(int argc, char** argv) {
    DecompressArgs args;
    po::variables_map values;
    if (!parse_command_line(argc, argv, kHelp, [&](po::options_description& o) { add_options(o, args); }, values)) {
        return 0;
    }
    args.input = values["input"].as<std::string>();
    require_option(args.gpu >= 0, "--gpu", ">= 0", args.gpu);
    check_outputs({{"-o", args.output}}, {{"INPUT", args.input}, {"--reference", args.reference}});
    check_vectors_output(args.output);

    const DeviceKind device = parse_option_value([&] { return parse_device(args.device); });
    check_inputs({{"INPUT", args.input}, {"--reference", args.reference}});
    const VlatFile file = during("reading " + args.input, [&] { return read_vlat(args.input); });
    const GpuChoice gpu = choose_gpu(device, args.gpu);
    print_device_note(kHelp.name, gpu.note, args.quiet);
    // With one anchor the ids take no bits, so a small file can stand for more vectors than memory holds.
    check_memory(args.input + ": decoding " + count_text(file.n) + " x " + count_text(file.d) + " float32",
                 table_bytes(file.n, file.d, sizeof(float)));
    const Matrix reconstruction = during("decoding the vectors", [&] {
#ifdef VLATTICE_HAVE_CUDA
        return gpu.use ? reconstruct_cuda(file, args.gpu) : reconstruct(file);
#else
        return reconstruct(file);
#endif
    });
    // The reference is read and compared before anything is written, so a bad reference leaves the
    // output as it was.
    std::optional<double> mse;
    if (!args.reference.empty()) {
        ReadOptions read_options;
        read_options.dataset = args.dataset;
        const LoadedPoints original = during("reading --reference " + args.reference,
                                             [&] { return load_points(args.reference, read_options, file.metric); });
        if (original.points.rows != reconstruction.rows || original.points.cols != reconstruction.cols) {
            throw Error("--reference " + args.reference + " holds " + std::to_string(original.points.rows) + " x " +
                        std::to_string(original.points.cols) + " vectors, but " + args.input + " stands for " +
                        std::to_string(reconstruction.rows) + " x " + std::to_string(reconstruction.cols));
        }
        mse = mean_squared_error(reconstruction, original.points);
    }
    during("writing -o " + args.output, [&] { write_vectors(args.output, reconstruction); });

    if (!args.quiet) {
        std::printf("wrote %s: %zu x %zu (decoded on the %s)\n", args.output.c_str(), reconstruction.rows,
                    reconstruction.cols, gpu.use ? "GPU" : "CPU");
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
