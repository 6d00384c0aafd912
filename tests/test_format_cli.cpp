// The CLI on .vlat version 3 files and on models (n = 0): what `info` shows of the product code and
// of every section, decompress on product codes, and decompress and query refusing a model, which
// has no vectors.
#include "product_sample.hpp"
#include "support.hpp"

#include "vlattice/codec.hpp"
#include "vlattice/format.hpp"
#include "vlattice/io.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

using Catch::Contains;
using namespace vlattice;
using namespace vlattice::test;

namespace {

nlohmann::json info_json(const std::string& vlat) {
    const CommandResult info = run_cli("info --json " + quote(vlat));
    INFO(info.output);
    REQUIRE(info.exit_code == 0);
    return nlohmann::json::parse(info.output);
}

}  // namespace

TEST_CASE("info shows the product code, its parameters and every section's bytes per vector", "[cli][product]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    ScratchDir dir;
    const std::string vlat = dir.path("v3.vlat");
    const VlatFile file = product_sample(rng, 200, 10, 6, 7, 4, 3);
    write_vlat(vlat, file);
    const VlatFile back = read_vlat(vlat);

    const nlohmann::json info = info_json(vlat);
    CHECK(info["version"] == 3);
    CHECK(info["codec"] == "product");
    CHECK(info["model"] == false);
    CHECK(info["product"]["description"] == "M = 3 x 4 bits over 7 rotated dimensions");
    CHECK(info["product"]["bits"] == 4);
    CHECK(info["product"]["subspaces"] == 3);
    CHECK(info["product"]["rotated_dims"] == 7);
    CHECK(info["product"]["code_bytes"] == 2);
    REQUIRE(info["sections"].size() == 6);
    for (std::size_t i = 0; i < 6; ++i) {
        const nlohmann::json& section = info["sections"][i];
        CHECK(section["tag"] == back.sections[i].tag);
        CHECK(section["bytes"] == back.sections[i].length);
        CHECK(section["bytes_per_vector"].get<double>() == Approx(back.sections[i].length / 200.0));
    }
    CHECK(info["sections"][4]["bytes_per_vector"].get<double>() == 2.0);
    // 200 assignments of 3 bits (75 bytes) and 200 codes of 2 bytes.
    CHECK(info["code_bytes_per_vector"].get<double>() == Approx((75.0 + 400.0) / 200.0));

    const CommandResult text = run_cli("info " + quote(vlat));
    INFO(text.output);
    REQUIRE(text.exit_code == 0);
    CHECK_THAT(text.output, Contains("residual codec          product"));
    CHECK_THAT(text.output, Contains("product code            M = 3 x 4 bits over 7 rotated dimensions"));
    CHECK_THAT(text.output, Contains("product code bytes      2"));
    CHECK_THAT(text.output, Contains("ROTN           284 bytes        1.42 per vector"));
    CHECK_THAT(text.output, Contains("CODE           400 bytes           2 per vector"));
}

TEST_CASE("decompress writes the vectors of a version 3 file", "[cli][product]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    ScratchDir dir;
    const std::string vlat = dir.path("v3.vlat");
    const VlatFile file = product_sample(rng, 100, 12, 4, 12, 8, 4);
    write_vlat(vlat, file);
    const std::string out = dir.path("out.fvecs");
    const CommandResult run = run_cli("decompress " + quote(vlat) + " -o " + quote(out) + " --device cpu");
    INFO(run.output);
    REQUIRE(run.exit_code == 0);
    CHECK(read_vectors(out).data == reconstruct(file).data);
}

TEST_CASE("info describes a model without per-vector figures", "[cli][model]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    ScratchDir dir;
    const std::string model = dir.path("model.vlat");
    write_vlat(model, product_sample(rng, 0, 8, 3, 8, 8, 2));

    const nlohmann::json info = info_json(model);
    CHECK(info["n"] == 0);
    CHECK(info["model"] == true);
    CHECK(info["product"]["description"] == "M = 2 x 8 bits over 8 rotated dimensions");
    for (const char* key : {"code_bytes_per_vector", "code_ratio_to_float32", "bytes_per_vector", "ratio_to_float32"}) {
        CHECK_FALSE(info.contains(key));
    }
    for (const nlohmann::json& section : info["sections"]) {
        CHECK_FALSE(section.contains("bytes_per_vector"));
    }
    const CommandResult text = run_cli("info " + quote(model));
    INFO(text.output);
    REQUIRE(text.exit_code == 0);
    CHECK_THAT(text.output, Contains("vectors (n)             0, model (no vectors)"));
    CHECK_THAT(text.output, !Contains("per vector"));
}

TEST_CASE("decompress and query refuse a model", "[cli][model]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    ScratchDir dir;
    const std::string model = dir.path("model.vlat");
    write_vlat(model, product_sample(rng, 0, 8, 3, 8, 8, 2));
    const std::string refusal = model + " is a model with no vectors; encode vectors with it first";
    const CommandResult decompress =
        run_cli("decompress " + quote(model) + " -o " + quote(dir.path("out.npy")) + " --device cpu");
    CHECK(decompress.exit_code != 0);
    CHECK_THAT(decompress.output, Contains(refusal));
    write_vectors(dir.path("queries.npy"), random_points(3, 8, rng));
    const CommandResult query =
        run_cli("query " + quote(model) + " --queries " + quote(dir.path("queries.npy")) + " --device cpu");
    CHECK(query.exit_code != 0);
    CHECK_THAT(query.output, Contains(refusal));
    CHECK_FALSE(std::filesystem::exists(dir.path("out.npy")));
}
