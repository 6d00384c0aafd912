// vlattice decompress IN.vlat -o OUT: write the vectors the file stands for, and with --reference
// measure how far they are from the original.
#include "activity.hpp"
#include "commands.hpp"
#include "device_note.hpp"
#include "encoded_vectors.hpp"
#include "input_files.hpp"
#include "number_options.hpp"
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
#include <iostream>
#include <optional>
#include <string>

namespace vlattice::cli {

namespace {

constexpr const char* kStandardOutput = "standard output";

const CommandHelp kHelp{
    "decompress",
    "IN.vlat -o OUT.(fvecs|fbin|npy|hdf5) [--reference ORIGINAL] [options]",
    "IN.vlat",
    "Writes every vector of IN.vlat as float32: its anchor plus its decoded residual\n"
    "when the file has residual codes (an HDF5 output holds them in dataset `train`).\n"
    "The CPU and the GPU decode to the same bits. With --reference, also prints the\n"
    "mean squared distance between the reconstruction and the original vectors\n"
    "(normalised first when the file's metric is angular); without residual codes,\n"
    "for the input the file was made from, that is the energy of the run (with f16\n"
    "anchor storage, up to the anchors' rounding to half precision).\n"
    "-o - writes to standard output (npy, fvecs or fbin, named by --output-format)\n"
    "as it goes, with no temporary file: a failure midway leaves what was written\n"
    "and exits non-zero. The messages then go to standard error.",
};

struct DecompressArgs {
    std::string input;
    std::string output;
    std::string output_format;
    std::string reference;
    std::string dataset;
    std::string device;
    int gpu = 0;
    bool quiet = false;
};

void add_options(po::options_description& options, DecompressArgs& a) {
    options.add_options()
        ("output,o", po::value(&a.output)->required()->value_name("FILE"),
         "the .fvecs, .fbin, .npy or .hdf5 file to write, or - for standard output; an existing file is "
         "replaced only when everything succeeds")
        ("output-format", po::value(&a.output_format)->value_name("FORMAT"),
         "the format of the output by name, in place of its extension: fvecs fbin npy h5 hdf5; needed for -o - "
         "(standard output: fvecs, fbin or npy)")
        ("reference", po::value(&a.reference)->value_name("ORIGINAL"),
         "the original vectors (any format compress reads): print the reconstruction's mean squared error")
        ("dataset", po::value(&a.dataset)->default_value(ReadOptions{}.dataset)->value_name("NAME"),
         "dataset to read from an HDF5 --reference")
        ("device", po::value(&a.device)->default_value("auto")->value_name("KIND"),
         "where to decode: auto (the GPU when one is usable, else the CPU), cpu, or cuda")
        ("gpu", whole_number(&a.gpu, 0)->default_value(0)->value_name("N"), "which GPU")
        ("quiet,q", po::bool_switch(&a.quiet), "print nothing but errors and the error asked for by --reference");
}

int decompress(int argc, char** argv) {
    DecompressArgs args;
    po::variables_map values;
    if (!parse_command_line(argc, argv, kHelp, [&](po::options_description& o) { add_options(o, args); }, values)) {
        return 0;
    }
    args.input = values["input"].as<std::string>();
    // Standard output has no name to tell the format by, and no rename to wait for.
    const bool to_stdout = args.output == "-";
    if (to_stdout && args.output_format.empty()) {
        throw UsageError("-o -: standard output has no extension to tell the format by; name it with --output-format "
                         "(fvecs, fbin or npy)");
    }
    const std::string file_output = to_stdout ? "" : args.output;
    check_outputs({{"-o", file_output}}, {{"INPUT", args.input}, {"--reference", args.reference}});
    clear_stale_temporaries(kHelp.name, {{"-o", file_output}}, args.quiet);
    // A format that cannot be written is a usage error where an option named it, a data error (as
    // for any path) where the extension did.
    const auto check_format = [&] {
        check_vectors_output(to_stdout ? kStandardOutput : args.output, args.output_format, to_stdout);
    };
    if (args.output_format.empty()) {
        check_format();
    } else {
        parse_option_value(check_format);
    }
    // The messages leave standard output to the vectors when they go there.
    std::FILE* const messages = to_stdout ? stderr : stdout;

    const DeviceKind device = parse_option_value([&] { return parse_device(args.device); });
    check_inputs({{"INPUT", args.input}, {"--reference", args.reference}});
    const VlatFile file = read_encoded_vectors(args.input);
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
    if (to_stdout) {
        write_vectors(std::cout, kStandardOutput, reconstruction, args.output_format);
    } else {
        during("writing -o " + args.output, [&] { write_vectors(args.output, reconstruction, args.output_format); });
    }

    if (!args.quiet) {
        std::fprintf(messages, "wrote %s: %zu x %zu (decoded on the %s)\n",
                     to_stdout ? kStandardOutput : args.output.c_str(), reconstruction.rows, reconstruction.cols,
                     gpu.use ? "GPU" : "CPU");
    }
    if (mse) {
        std::fprintf(messages, "reconstruction MSE: %.10g\n", *mse);
    }
    return 0;
}

}  // namespace

int run_decompress(int argc, char** argv) {
    return run_guarded(kHelp.name, [&] { return decompress(argc, argv); });
}

}  // namespace vlattice::cli
