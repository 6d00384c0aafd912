// Text that comes from files: JSON parsed with a nesting limit (parse_json_text), and strings made
// safe to print (printable).
#include "support.hpp"

#include "vlattice/json_text.hpp"
#include "vlattice/printable.hpp"

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

TEST_CASE("printable escapes control characters and bytes that are not UTF-8", "[printable]") {
    CHECK(printable("plain text, café, 日本, 😀, a\\nb") == "plain text, café, 日本, 😀, a\\nb");
    CHECK(printable("line\nforged\r\tx") == "line\\nforged\\r\\tx");
    CHECK(printable("\x1b[2J\x07") == "\\x1b[2J\\x07");
    CHECK(printable(std::string("a\0b", 3)) == "a\\x00b");
    CHECK(printable("del\x7f") == "del\\x7f");
    // C1 controls (U+0080 to U+009F; U+009B is a one-character CSI), but not U+00A0 and above.
    CHECK(printable("\xc2\x9b" "31m \xc2\x85 \xc2\xa0") == "\\u009b31m \\u0085 \xc2\xa0");
    // Not UTF-8: a stray byte, a truncated sequence, an overlong newline, a surrogate, past U+10FFFF.
    CHECK(printable("\xff") == "\\xff");
    CHECK(printable("\xe2\x82") == "\\xe2\\x82");
    CHECK(printable("\xc0\x8a") == "\\xc0\\x8a");
    CHECK(printable("\xed\xa0\x80") == "\\xed\\xa0\\x80");
    CHECK(printable("\xf4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");
    CHECK(printable("\xf0\x9f\x98\x80\xe2\x82\xac") == "\xf0\x9f\x98\x80\xe2\x82\xac");
}
