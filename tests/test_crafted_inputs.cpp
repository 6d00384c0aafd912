// Commands given files whose checksums and syntax are valid but whose contents are hostile: JSON
// nested 50,000 levels deep. Each must end in a clear error and a non-zero exit, never a crash.
#include "support.hpp"

#include "vlattice/format.hpp"
#include "vlattice/results_file.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using Catch::Contains;
using namespace vlattice;
using namespace vlattice::test;

namespace {

std::string nested_json(std::size_t levels) {
    return "{\"x\":" + std::string(levels - 1, '[') + "1" + std::string(levels - 1, ']') + "}";
}

void check_refused(const CommandResult& result, const std::string& message) {
    INFO(result.output);
    CHECK(result.exit_code == 1);
    CHECK_THAT(result.output, Contains("error: ") && Contains("crafted.vlat: " + message));
}

}  // namespace

TEST_CASE("info refuses META nested 50,000 levels deep instead of crashing", "[cli][crafted]") {
    ScratchDir dir;
    VlatFile file;
    file.n = 3;
    file.d = 2;
    file.anchors = Matrix(1, 2);
    file.assignments = {0, 0, 0};
    file.metadata_json = nested_json(50000);
    const std::string path = dir.path("crafted.vlat");
    write_vlat(path, file);
    for (const char* json : {"", "--json "}) {
        const CommandResult info = run_cli(std::string("info ") + json + quote(path));
        check_refused(info, "section META nests deeper than 64 levels");
    }
    // The limit is on nesting, not on the metadata vlattice writes.
    file.metadata_json = nested_json(64);
    write_vlat(path, file);
    CHECK(run_cli("info " + quote(path)).exit_code == 0);
}

TEST_CASE("batch and the results reader refuse JSON nested deeper than 64 levels", "[cli][crafted]") {
    ScratchDir dir;
    const std::string manifest = dir.path("deep.json");
    write_file(manifest, nested_json(50000));
    const CommandResult batch =
        run_cli("batch --manifest " + quote(manifest) + " -o " + quote(dir.path("out")) + " --device cpu --quiet");
    INFO(batch.output);
    CHECK(batch.exit_code == 2);
    CHECK_THAT(batch.output, Contains("--manifest " + manifest + " nests deeper than 64 levels"));

    const std::string results = dir.path("deep.results.h5");
    run_python("import h5py\n"
               "with h5py.File('" + results + "', 'w') as f:\n"
               "    f.attrs['metrics'] = '{\"x\":' + '[' * 49999 + '1' + ']' * 49999 + '}'\n");
    CHECK_THROWS_WITH(read_results_metrics(results),
                      Contains(results + ": attribute 'metrics' nests deeper than 64 levels"));
}
