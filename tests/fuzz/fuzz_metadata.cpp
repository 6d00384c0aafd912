// libFuzzer target for the JSON read from files (a .vlat's META, a results file's metrics): the
// input is the JSON text. parse_json_text must return a value or throw vlattice::Error; a value it
// returns must survive what `info` does with it (flatten, dump as ASCII, print its keys and strings
// through printable()), and no printable() output may hold a control character.
#include "vlattice/json_text.hpp"
#include "vlattice/printable.hpp"
#include "vlattice/types.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace {

// What a terminal could act on: C0 controls, DEL, and C1 controls as UTF-8 (0xc2 0x80 to 0xc2 0x9f).
void check_printable(const std::string& text) {
    const std::string shown = vlattice::printable(text);
    for (std::size_t i = 0; i < shown.size(); ++i) {
        const auto c = static_cast<unsigned char>(shown[i]);
        const bool c1 = c == 0xc2 && i + 1 < shown.size() && static_cast<unsigned char>(shown[i + 1]) < 0xa0;
        if (c < 0x20 || c == 0x7f || c1) {
            __builtin_trap();
        }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    check_printable(text);
    try {
        const nlohmann::json value = vlattice::parse_json_text(text, "fuzz.vlat: section META");
        const std::string ascii = value.dump(2, ' ', /*ensure_ascii=*/true);
        for (const char c : ascii) {
            if (c != '\n' && (c < 0x20 || c > 0x7e)) {
                __builtin_trap();
            }
        }
        const nlohmann::json flat = value.flatten();
        for (const auto& field : flat.items()) {
            check_printable(field.key());
            if (field.value().is_string()) {
                check_printable(field.value().get<std::string>());
            }
        }
    } catch (const vlattice::Error&) {
    }
    return 0;
}
