// vlattice encode --model MODEL.vlat INPUT -o OUT.vlat: code vectors with a trained model, and
// optionally append them to a file coded with the same model.
#include "activity.hpp"
#include "anneal_options.hpp"
#include "coding_options.hpp"
#include "commands.hpp"
#include "device_note.hpp"
#include "input_files.hpp"
#include "number_options.hpp"
#include "options.hpp"
#include "progress.hpp"

#include "vlattice/atomic_file.hpp"
#include "vlattice/codec.hpp"
#include "vlattice/device.hpp"
#include "vlattice/format.hpp"
#include "vlattice/model.hpp"
#include "vlattice/pipeline.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include <unistd.h>

namespace vlattice::cli {

namespace {

const CommandHelp kHelp{
    "encode",
    "--model MODEL.vlat INPUT -o OUT.vlat [--append-to FILE.vlat] [options]",
    "INPUT",
    "Codes the vectors in INPUT with a trained model (from `vlattice train`, or any\n"
    ".vlat: its anchors and residual code): each vector's nearest anchor, then its\n"
    "residual code, exactly as `compress` codes the vectors it trained on. The model\n"
    "is not changed, so vectors coded at different times stay comparable. With\n"
    "--append-to, OUT holds that file's vectors followed by INPUT's (the file must\n"
    "have been coded with the same model; -o may name the same file). INPUT takes\n"
    "every format compress reads; a model of metric angular scales each vector to\n"
    "unit length first.",
};

struct EncodeArgs {
    AnnealArgs read;  // only the input options: --dataset, --input-format
    std::string model;
    std::string input;
    std::string output;
    std::string append_to;
    std::string device;
    std::string kernel;
    int threads = 0;
    bool quiet = false;
};

void add_options(po::options_description& options, EncodeArgs& a) {
    options.add_options()
        ("model", po::value(&a.model)->required()->value_name("MODEL.vlat"), "the trained model (or any .vlat)")
        ("output,o", po::value(&a.output)->required()->value_name("FILE"),
         "the .vlat to write; replaces an existing file only once it is written")
        ("append-to", po::value(&a.append_to)->value_name("FILE.vlat"),
         "write this file's vectors first, then INPUT's; it must hold the same model")
        ("dataset", po::value(&a.read.dataset)->default_value(ReadOptions{}.dataset)->value_name("NAME"),
         "dataset to read from an HDF5 INPUT")
        ("device", po::value(&a.device)->default_value("auto")->value_name("KIND"),
         "auto (the GPU when one is usable, else the CPU), cpu, or cuda; both code the same bytes")
        ("kernel", po::value(&a.kernel)->default_value("auto")->value_name("FAMILY"),
         "the GPU's kernels: auto (the fastest the GPU has, or VLATTICE_KERNEL when set), hopper, portable or "
         "cuda-cores; every one codes the same bytes")
        ("threads", whole_number(&a.threads, 0)->default_value(0)->value_name("N"), "CPU threads; 0 uses every core")
        ("quiet,q", po::bool_switch(&a.quiet), "print nothing but errors");
    add_input_format_option(options, a.read);
    add_memory_option(options, a.read);
}

int encode(int argc, char** argv) {
    EncodeArgs args;
    po::variables_map values;
    if (!parse_command_line(argc, argv, kHelp, [&](po::options_description& o) { add_options(o, args); }, values)) {
        return 0;
    }
    args.input = values["input"].as<std::string>();
    const std::vector<NamedPath> outputs{{"-o", args.output}};
    check_outputs(outputs, {{"INPUT", args.input == "-" ? "" : args.input}, {"--model", args.model}});
    clear_stale_temporaries(kHelp.name, outputs, args.quiet);
    const DeviceKind device = parse_option_value([&] { return parse_device(args.device); });
    const GpuKernels kernels = parse_option_value([&] { return parse_gpu_kernels(args.kernel); });
    check_memory_arg(args.read);
    args.input = input_file(args.input, args.read);
    check_inputs({{"INPUT", args.input}, {"--model", args.model}});
    AtomicFile{args.output};

    const auto start = std::chrono::steady_clock::now();
    const VlatFile model = during("reading --model " + args.model, [&] { return model_of(read_vlat(args.model)); });
    const LoadedSet loaded = load_input(kHelp.name, args.input, args.read, model.metric, args.quiet);
    const PointView points = loaded.points.view();
    BackendChoice choice = make_backend(device, 0, args.threads, kernels);
    print_device_note(kHelp.name, choice.note, args.quiet);

    nlohmann::json metadata = nlohmann::json::parse(model.metadata_json, nullptr, false);
    if (!metadata.is_object()) {
        metadata = nlohmann::json::object();
    }
    metadata["encoded"] = {{"input", std::filesystem::path(args.input).filename().string()},
                           {"n", points.rows}};
    VlatFile file = during("coding the vectors", [&] {
        PassLine line(!args.quiet && ::isatty(STDERR_FILENO), "coding every row");
        return encode_with_model(model, points, *choice.backend, metadata.dump(), nullptr, nullptr,
                                 [&](std::size_t done, std::size_t total) { line.rows(done, total); },
                                 coding_tile_rows(args.read, points.cols));
    });
    if (!args.append_to.empty()) {
        const VlatFile base = during("reading --append-to " + args.append_to, [&] { return read_vlat(args.append_to); });
        file = append_vectors(base, file);
        file.metadata_json = base.metadata_json;
    }
    during("writing -o " + args.output, [&] { write_vlat(args.output, file); });
    if (!args.quiet) {
        const double bytes = static_cast<double>(std::filesystem::file_size(args.output));
        std::printf("coded       %zu vectors of %s with %s (%s)\n", points.rows, args.input.c_str(),
                    args.model.c_str(), describe_coding(file).c_str());
        std::printf("output      %s: %llu vectors, %.0f bytes, %.3f code bytes per vector; %.3f s (%s)\n",
                    args.output.c_str(), static_cast<unsigned long long>(file.n), bytes, code_bytes_per_vector(file),
                    seconds_since(start), choice.backend->name());
    }
    return 0;
}

}  // namespace

int run_encode(int argc, char** argv) {
    return run_guarded(kHelp.name, [&] { return encode(argc, argv); });
}

}  // namespace vlattice::cli
