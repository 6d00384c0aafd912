// The options every command that runs the annealing shares (compress, compare): what to learn and
// how, where the input's vectors are, and which GPU. Defaults come from AnnealConfig and
// ReadOptions, so --help cannot drift from what a run uses.
#pragma once

#include "options.hpp"

#include "vlattice/config.hpp"
#include "vlattice/device.hpp"
#include "vlattice/pipeline.hpp"
#include "vlattice/types.hpp"

#include <string>

namespace vlattice::cli {

struct AnnealArgs {
    AnnealConfig config;
    long long anchors = 0;  // signed, so that -m -1 is reported rather than wrapped
    long long init_sample = 0;  // checked, then copied into config
    std::string seed;           // all of [0, 2^64), so read as text and checked
    std::string metric;
    std::string storage;
    std::string precision;
    int gpu = 0;
    std::string kernel;  // --kernel, checked into `kernels`
    GpuKernels kernels = GpuKernels::automatic;
    std::string gpu_memory;           // --gpu-memory, checked into `gpu_memory_bytes` (0 for auto)
    std::uint64_t gpu_memory_bytes = 0;
    std::string dataset;
    std::string input_format;  // --input-format, for the commands that declare it; empty: by extension
    std::string memory;        // --memory, checked into `memory_bytes` (0 for auto)
    std::uint64_t memory_bytes = 0;
};

void add_anneal_options(po::options_description& options, AnnealArgs& args);

// --memory, which add_anneal_options includes, for the commands that read points without a fit
// (encode); check_memory_arg reads it into memory_bytes (check_anneal_args does too). UsageError.
void add_memory_option(po::options_description& options, AnnealArgs& args);
void check_memory_arg(AnnealArgs& args);

// The rows of d values a coding pass takes at a time (encode_with_model's tile_rows): 0, the
// default tile, without --memory; under it, at most a quarter of its size as float32, so that the
// tiles stay within what the user gave as the points do.
std::size_t coding_tile_rows(const AnnealArgs& args, std::size_t d);

// --input-format, which names the format of INPUT in place of its extension, and which standard
// input (-) needs.
void add_input_format_option(po::options_description& options, AnnealArgs& args);

// INPUT as a file to read: standard input, for -, read to its end first (--input-format is then
// required: a UsageError without it); a given --input-format is checked too (a UsageError). Throws
// Error when standard input cannot be read.
std::string input_file(const std::string& input, const AnnealArgs& args);

// The checks the parser leaves (the numeric options check their ranges as they are read): --seed,
// --storage, --assign-precision, --kernel, --memory and the --metric name, before the input is read (whether M fits
// the data is left to vlattice::validate once n is known); then copies M, the init sample, the seed,
// the storage and the assign precision into the config. Throws UsageError.
void check_anneal_args(AnnealArgs& args);

// Throws Error unless `sample` training rows (--train-sample) hold the `anchors` to fit.
void check_train_sample(std::size_t sample, std::size_t anchors);

// --metric, where `auto` asks the input (an HDF5 file's `distance` attribute) and falls back to l2.
Metric metric_of(const AnnealArgs& args, const std::string& input);

// The warning of a run that found `zero_rows` all-zero vectors under --metric angular (none: no warning).
void warn_zero_rows(const std::string& command, std::size_t zero_rows, bool quiet);

// Loads `path` as the options say (--dataset, --memory) with `metric`, its values in their stored
// type (load_stored_points). Unless `quiet`, warns on stderr, as `command`, about all-zero vectors that
// angular cannot give a direction.
LoadedSet load_input(const std::string& command, const std::string& path, const AnnealArgs& args, Metric metric,
                     bool quiet);

}  // namespace vlattice::cli
