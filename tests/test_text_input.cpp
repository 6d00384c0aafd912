// Text that comes from files: JSON parsed with a nesting limit (parse_json_text).
#include "support.hpp"

#include "vlattice/json_text.hpp"

#include <catch2/catch.hpp>

#include <sstream>

using Catch::Contains;
using Catch::StartsWith;
using namespace vlattice;

namespace {

// `levels` nested arrays around one number, inside an object: {"x":[[...[1]...]]}.
std::string nested(std::size_t levels) {
    return "{\"x\":" + std::string(levels - 1, '[') + "1" + std::string(levels - 1, ']') + "}";
}

}  // namespace

TEST_CASE("parse_json_text accepts 64 levels of nesting and refuses 65, naming the source", "[json]") {
    CHECK(parse_json_text(nested(64), "f: section META").dump().size() == nested(64).size());
    CHECK_THROWS_WITH(parse_json_text(nested(65), "f: section META"),
                      StartsWith("f: section META nests deeper than 64 levels"));
    // Objects count as arrays do.
    std::string objects;
    for (int level = 0; level < 65; ++level) {
        objects += "{\"k\":";
    }
    objects += "1" + std::string(65, '}');
    CHECK_THROWS_WITH(parse_json_text(objects, "where"), Contains("nests deeper than 64 levels"));
}

TEST_CASE("parse_json_text refuses 50,000 levels without walking them, from text or a stream", "[json]") {
    const std::string deep = nested(50000);
    CHECK_THROWS_WITH(parse_json_text(deep, "deep.vlat: section META"),
                      StartsWith("deep.vlat: section META nests deeper than 64 levels"));
    std::istringstream stream(deep);
    CHECK_THROWS_WITH(parse_json_text(stream, "--manifest deep.json"),
                      StartsWith("--manifest deep.json nests deeper than 64 levels"));
}

TEST_CASE("parse_json_text reports text that is not JSON as an Error naming the source", "[json]") {
    for (const char* text : {"", "{", "{\"a\":1,}", "[1] 2", "{\"a\":\"\xff\"}"}) {
        INFO(text);
        CHECK_THROWS_AS(parse_json_text(text, "f.h5: attribute 'metrics'"), Error);
        CHECK_THROWS_WITH(parse_json_text(text, "f.h5: attribute 'metrics'"),
                          StartsWith("f.h5: attribute 'metrics' is not valid JSON"));
    }
    CHECK(parse_json_text(R"({"a":[1,{"b":null}],"c":"é"})", "f")["a"][1].contains("b"));
}
