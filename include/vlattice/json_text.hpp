// Parsing JSON that comes from a file (a .vlat's META, a batch manifest, a results file's metrics).
// Every such text goes through parse_json_text, so that one limit bounds how deep any of it nests:
// walking a value (dump, flatten, comparison) recurses once per level, and a file nested tens of
// thousands of levels deep would otherwise overflow the stack.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <istream>
#include <string>

namespace vlattice {

// The most levels of objects and arrays a JSON text read from a file may nest (the deepest
// vlattice writes is 3).
inline constexpr std::size_t kMaxJsonDepth = 64;

// Parses `text`; throws Error starting with `where` ("FILE: section META") when it is not JSON or
// nests deeper than kMaxJsonDepth levels, checked while parsing, before the deep value exists.
nlohmann::json parse_json_text(const std::string& text, const std::string& where);
nlohmann::json parse_json_text(std::istream& text, const std::string& where);

}  // namespace vlattice
