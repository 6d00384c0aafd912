// The library steps under the CLI: reconstruction, its error, loading for a metric, and the
// metadata that must stay reproducible.
#include "reference.hpp"
#include "support.hpp"

#include "vlattice/codec.hpp"
#include "vlattice/cpu_backend.hpp"
#include "vlattice/io.hpp"
#include "vlattice/model.hpp"
#include "vlattice/pipeline.hpp"
#include "vlattice/report.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <limits>

using namespace vlattice;
using namespace vlattice::test;
using Catch::Contains;

namespace {

Matrix matrix(std::size_t rows, std::size_t cols, std::vector<float> values) {
    Matrix m(rows, cols);
    m.data.assign(values.begin(), values.end());
    return m;
}

FitResult small_result() {
    FitResult result;
    result.anchors = matrix(2, 2, {0, 0, 1, 1});
    result.assignments = {0, 1, 1};
    result.energy = 0.25;
    result.iterations = 7;
    result.converged = true;
    result.stop_reason = "converged";
    result.merged = 1;
    result.split = 2;
    result.reseeded = 3;
    IterationRecord record;
    record.iteration = 0;
    record.energy = 0.5;
    result.history = {record};
    result.seconds.init = 0.125;
    result.seconds.total = 1.5;
    return result;
}

}  // namespace

TEST_CASE("reconstruct puts each vector's anchor in its row", "[pipeline]") {
    VlatFile file;
    file.n = 4;
    file.d = 2;
    file.anchors = matrix(3, 2, {1, 2, 3, 4, 5, 6});
    file.assignments = {2, 0, 0, 1};
    const Matrix out = reconstruct(file);
    CHECK(out.rows == 4);
    CHECK(out.cols == 2);
    CHECK(out.data == Floats{5, 6, 1, 2, 1, 2, 3, 4});

    file.assignments[3] = 3;
    CHECK_THROWS_WITH(reconstruct(file), Contains("vector 3") && Contains("anchor 3"));
}

TEST_CASE("mean_squared_error is the mean over rows of the squared row distance", "[pipeline]") {
    const Matrix a = matrix(2, 3, {0, 0, 0, 1, 2, 3});
    const Matrix b = matrix(2, 3, {1, 0, 0, 1, 2, 5});
    CHECK(mean_squared_error(a, b) == Approx((1.0 + 4.0) / 2.0));
    CHECK(mean_squared_error(a, a) == 0.0);

    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const Matrix x = random_points(300, 7, rng);
    const Matrix y = random_points(300, 7, rng);
    double expected = 0.0;
    for (std::size_t i = 0; i < x.rows; ++i) {
        for (std::size_t k = 0; k < x.cols; ++k) {
            const double diff = static_cast<double>(x.row(i)[k]) - y.row(i)[k];
            expected += diff * diff;
        }
    }
    CHECK(mean_squared_error(x, y) == Approx(expected / 300.0).epsilon(1e-12));

    CHECK_THROWS_WITH(mean_squared_error(a, matrix(3, 2, {0, 0, 0, 0, 0, 0})), Contains("2 x 3") && Contains("3 x 2"));
}

TEST_CASE("load_points normalises rows for the angular metric and counts zero rows", "[pipeline]") {
    ScratchDir dir;
    const std::string path = dir.path("points.fvecs");
    write_vectors(path, matrix(3, 2, {3, 4, 0, 0, -2, 0}));

    const LoadedPoints l2 = load_points(path, {}, Metric::l2);
    CHECK(l2.points.data == Floats{3, 4, 0, 0, -2, 0});
    CHECK(l2.zero_rows == 0);

    const LoadedPoints angular = load_points(path, {}, Metric::angular);
    CHECK(angular.zero_rows == 1);
    CHECK(angular.points.row(0)[0] == Approx(0.6));
    CHECK(angular.points.row(0)[1] == Approx(0.8));
    CHECK(angular.points.row(1)[0] == 0.0f);
    CHECK(angular.points.row(1)[1] == 0.0f);
    CHECK(angular.points.row(2)[0] == -1.0f);
    CHECK(angular.points.row(2)[1] == 0.0f);
}

TEST_CASE("load_points rejects a NaN, naming the row", "[pipeline]") {
    ScratchDir dir;
    const std::string path = dir.path("nan.fvecs");
    write_vectors(path, matrix(3, 2, {1, 2, 3, std::numeric_limits<float>::quiet_NaN(), 5, 6}));
    CHECK_THROWS_WITH(load_points(path, {}, Metric::angular), Contains("row 1") && Contains("NaN"));
}

TEST_CASE("run_metadata describes the result and nothing that varies between machines", "[pipeline]") {
    AnnealConfig config;
    config.anchors = 4;
    config.seed = 99;
    const FitResult result = small_result();
    const RunInput input{"/some/where/data.fvecs", 3, 2, Metric::angular};
    const nlohmann::json metadata = run_metadata(config, result, input);

    CHECK(metadata["input"] == "data.fvecs");
    CHECK(metadata["n"] == 3);
    CHECK(metadata["d"] == 2);
    CHECK(metadata["m_requested"] == 4);
    CHECK(metadata["m"] == 2);
    CHECK(metadata["metric"] == "angular");
    CHECK(metadata["energy"] == 0.25);
    CHECK(metadata["iterations"] == 7);
    CHECK(metadata["converged"] == true);
    CHECK(metadata["stop_reason"] == "converged");
    CHECK(metadata["config"]["seed"] == 99);
    CHECK(metadata["maintenance"]["split"] == 2);
    CHECK(metadata["tool_version"] == VLATTICE_VERSION);

    const nlohmann::json flat = metadata.flatten();
    for (const auto& entry : flat.items()) {
        INFO(entry.key());
        for (const char* banned : {"second", "time", "date", "thread", "backend", "history"}) {
            CHECK(entry.key().find(banned) == std::string::npos);
        }
    }
    CHECK(metadata.dump().find("/some/where") == std::string::npos);

    AnnealConfig other_threads = config;
    other_threads.threads = 7;
    FitResult other_timing = result;
    other_timing.seconds.total = 99.0;
    CHECK(run_metadata(other_threads, other_timing, input).dump() == metadata.dump());
}

TEST_CASE("train_model then encode_with_model carry the result, the input's shape and the metadata", "[pipeline]") {
    const FitResult result = small_result();
    const Matrix points = matrix(3, 2, {0.1f, 0, 1, 0.9f, 1.2f, 1});
    const RunInput input{"data.fvecs", 3, 2, Metric::angular};
    const nlohmann::json metadata = {{"energy", 0.25}};
    const std::unique_ptr<Backend> backend_owner = make_cpu_backend(2);
    Backend& backend = *backend_owner;
    TrainedCoding trained;
    const VlatFile model = train_model(points, result, input, AnchorStorage::f16, CodingSpec{}, backend, metadata, trained);
    CHECK(model.n == 0);
    const VlatFile file = encode_with_model(model, points, backend, model.metadata_json);
    CHECK(file.n == 3);
    CHECK(file.d == 2);
    CHECK(file.metric == Metric::angular);
    CHECK(file.anchor_storage == AnchorStorage::f16);
    CHECK(file.codec == ResidualCodec::none);
    CHECK(trained.codec == ResidualCodec::none);
    CHECK(file.anchors.data == result.anchors.data);
    CHECK(file.assignments == result.assignments);
    const nlohmann::json stored = nlohmann::json::parse(file.metadata_json);
    CHECK(stored["energy"] == 0.25);
    CHECK(stored["residuals"]["codec"] == "none");
}

TEST_CASE("run_report adds the history, the phase seconds, the backend and the threads", "[pipeline]") {
    AnnealConfig config;
    config.threads = 3;
    const FitResult result = small_result();
    ReportContext context;
    context.input = {"/data/x.fvecs", 3, 2, Metric::l2};
    context.backend = "cpu";
    context.threads = 3;
    context.load_seconds = 0.25;
    context.write_seconds = 0.25;
    const nlohmann::json report = run_report(config, result, context);
    CHECK(report["energy"] == 0.25);
    CHECK(report["backend"] == "cpu");
    CHECK(report["threads"] == 3);
    CHECK(report["input"] == "/data/x.fvecs");
    CHECK(report["n"] == 3);
    CHECK(report["d"] == 2);
    CHECK(report["m"] == 2);
    REQUIRE(report["history"].size() == 1);
    for (const char* key : {"iteration", "temperature", "trim", "eta", "energy", "changed", "merged", "split", "reseeded"}) {
        CHECK(report["history"][0].contains(key));
    }
    for (const char* phase : {"load", "init", "assign", "reduce", "update", "maintenance", "energy", "write", "total"}) {
        CHECK(report["seconds"].contains(phase));
    }
    CHECK(report["seconds"]["total"] == Approx(2.0));
}

TEST_CASE("anchor storage names round-trip", "[pipeline]") {
    CHECK(parse_anchor_storage(anchor_storage_name(AnchorStorage::f32)) == AnchorStorage::f32);
    CHECK(parse_anchor_storage(anchor_storage_name(AnchorStorage::f16)) == AnchorStorage::f16);
    CHECK_THROWS_WITH(parse_anchor_storage("f64"), Contains("f64"));
}
