#include "vlattice/json_text.hpp"

#include "vlattice/types.hpp"

#include <utility>

namespace vlattice {

namespace {

template <typename Input>
nlohmann::json parse_limited(Input&& text, const std::string& where) {
    // The callback sees each object and array as it opens, at the depth of its parent; throwing
    // there stops the parser before it descends further.
    const nlohmann::json::parser_callback_t limit_depth = [&](int depth, nlohmann::json::parse_event_t event,
                                                             nlohmann::json&) {
        const bool opens = event == nlohmann::json::parse_event_t::object_start ||
                           event == nlohmann::json::parse_event_t::array_start;
        if (opens && static_cast<std::size_t>(depth) >= kMaxJsonDepth) {
            throw Error(where + " nests deeper than " + std::to_string(kMaxJsonDepth) +
                        " levels (JSON objects and arrays)");
        }
        return true;
    };
    try {
        return nlohmann::json::parse(std::forward<Input>(text), limit_depth);
    } catch (const nlohmann::json::exception& e) {
        throw Error(where + " is not valid JSON: " + e.what());
    }
}

}  // namespace

nlohmann::json parse_json_text(const std::string& text, const std::string& where) {
    return parse_limited(text, where);
}

nlohmann::json parse_json_text(std::istream& text, const std::string& where) {
    return parse_limited(text, where);
}

}  // namespace vlattice
