// libFuzzer target for HDF5 inputs: the input is an .h5 file (the seeds are small files h5py
// writes in the ann-benchmarks layout; the fuzzer mutates their bytes). Every vlattice call that
// opens an HDF5 file runs on it: the vector reader for each dataset name the commands use, the
// metric attribute, the dataset probe and the results file's metrics. Each must return or throw
// vlattice::Error. libhdf5 does the parsing; a crash inside it is libhdf5's bug, not vlattice's,
// and the stack trace tells which.
#include "input_file.hpp"

#include "vlattice/io.hpp"
#include "vlattice/results_file.hpp"
#include "vlattice/types.hpp"

#include <cstdint>

namespace {

template <typename Call>
void run(Call&& call) {
    try {
        call();
    } catch (const vlattice::Error&) {
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const vlattice::fuzz::InputFile input(data, size, ".h5");
    const std::string& path = input.path();
    for (const char* dataset : {"train", "test", "neighbors", "anchors"}) {
        run([&] { vlattice::read_vectors(path, vlattice::ReadOptions{dataset}); });
    }
    run([&] { vlattice::input_metric(path); });
    run([&] { vlattice::has_hdf5_dataset(path, "train"); });
    run([&] { vlattice::results_h5_complete(path, 1, 1, 1); });
    run([&] { vlattice::read_results_metrics(path); });
    return 0;
}
