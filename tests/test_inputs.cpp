// Input files as users bring them (HDF5 files with links, numpy's default dtypes, named pipes, files
// too large for the machine): each is read correctly or refused at once, naming the file and the spot.
#include "support.hpp"

#include "vlattice/io.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <string>

using namespace vlattice;
using namespace vlattice::test;
using Catch::Contains;

namespace {

// Runs the CLI under timeout(1), so that a command that waits forever fails the test instead of
// hanging it: exit 124 then.
CommandResult run_cli_briefly(const std::string& arguments) {
    return run_command("timeout 20 " + cli_command() + " " + arguments);
}

void make_fifo(const std::string& path) {
    REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
}

}  // namespace

TEST_CASE("an HDF5 external link to a dataset in another file reads that dataset", "[inputs][hdf5]") {
    ScratchDir dir;
    std::filesystem::create_directory(dir.path("data"));
    // The link names its file relative to the linking file's folder, as h5py users write them.
    run_python("import h5py, numpy as np\n"
               "x = np.arange(500 * 8, dtype='<f4').reshape(500, 8)\n"
               "with h5py.File(" + quote(dir.path("data/vectors.h5")) + ", 'w') as f:\n"
               "    f['train'] = x\n"
               "with h5py.File(" + quote(dir.path("data/link.h5")) + ", 'w') as f:\n"
               "    f['train'] = h5py.ExternalLink('vectors.h5', '/train')\n");
    const Matrix linked = read_vectors(dir.path("data/link.h5"));
    REQUIRE(linked.rows == 500);
    REQUIRE(linked.cols == 8);
    CHECK(linked.row(499)[7] == 500.0f * 8.0f - 1.0f);

    const CommandResult run = run_cli("compress " + quote(dir.path("data/link.h5")) + " -o " +
                                      quote(dir.path("out.vlat")) + " -m 4 --iters 3 --device cpu --quiet");
    INFO(run.output);
    CHECK(run.exit_code == 0);

    // A linked file cut short is named as the file that holds the data.
    const std::string whole = read_file(dir.path("data/vectors.h5"));
    write_file(dir.path("data/vectors.h5"), whole.substr(0, whole.size() - 4000));
    CHECK_THROWS_WITH(read_vectors(dir.path("data/link.h5")), Contains("link.h5") && Contains("vectors.h5"));
}

TEST_CASE("an HDF5 external link to a named pipe is refused at once", "[inputs][hdf5]") {
    ScratchDir dir;
    run_python("import h5py\n"
               "with h5py.File(" + quote(dir.path("link.h5")) + ", 'w') as f:\n"
               "    f['train'] = h5py.ExternalLink('pipe.h5', '/train')\n"
               "    f['test'] = h5py.ExternalLink('pipe.h5', '/test')\n");
    make_fifo(dir.path("pipe.h5"));
    const CommandResult compress = run_cli_briefly("compress " + quote(dir.path("link.h5")) + " -o " +
                                                   quote(dir.path("out.vlat")) + " --device cpu --quiet");
    INFO(compress.output);
    CHECK(compress.exit_code == 1);
    CHECK_THAT(compress.output, Contains("link.h5: the external link to pipe.h5:/train") &&
                                    Contains("pipe.h5: not a regular file"));
    CHECK_FALSE(std::filesystem::exists(dir.path("out.vlat")));
}

TEST_CASE("an HDF5 dataset kept in external raw files is refused, naming it", "[inputs][hdf5]") {
    ScratchDir dir;
    run_python("import h5py, numpy as np\n"
               "with h5py.File(" + quote(dir.path("x.h5")) + ", 'w') as f:\n"
               "    d = f.create_dataset('train', (100, 4), dtype='<f4', external=[(" +
               quote(dir.path("raw.bin")) + ", 0, 1600)])\n"
               "    d[:] = np.ones((100, 4), dtype='<f4')\n");
    CHECK_THROWS_WITH(read_vectors(dir.path("x.h5")),
                      Contains("x.h5: dataset 'train' keeps its data in external raw files"));
}
