#include "vlattice/printable.hpp"

#include <cstdint>

namespace vlattice {

namespace {

std::string hex_escape(const char* prefix, std::uint8_t byte) {
    static const char* const kHex = "0123456789abcdef";
    return std::string(prefix) + kHex[byte >> 4] + kHex[byte & 0xf];
}

bool in(std::uint8_t byte, std::uint8_t lo, std::uint8_t hi) {
    return byte >= lo && byte <= hi;
}

// The length of the well-formed UTF-8 sequence at text[at] whose first byte is >= 0x80, or 0. The
// ranges are those of the Unicode standard's table 3-7, which leave out overlong forms (an
// overlong newline could otherwise pass as printable) and surrogates.
std::size_t utf8_length(std::string_view text, std::size_t at) {
    const auto byte = [&](std::size_t k) { return static_cast<std::uint8_t>(text[at + k]); };
    const std::uint8_t lead = byte(0);
    std::size_t length = 0;
    std::uint8_t second_lo = 0x80;
    std::uint8_t second_hi = 0xbf;
    if (in(lead, 0xc2, 0xdf)) {
        length = 2;
    } else if (in(lead, 0xe0, 0xef)) {
        length = 3;
        second_lo = lead == 0xe0 ? 0xa0 : 0x80;
        second_hi = lead == 0xed ? 0x9f : 0xbf;
    } else if (in(lead, 0xf0, 0xf4)) {
        length = 4;
        second_lo = lead == 0xf0 ? 0x90 : 0x80;
        second_hi = lead == 0xf4 ? 0x8f : 0xbf;
    } else {
        return 0;
    }
    if (text.size() - at < length || !in(byte(1), second_lo, second_hi)) {
        return 0;
    }
    for (std::size_t k = 2; k < length; ++k) {
        if (!in(byte(k), 0x80, 0xbf)) {
            return 0;
        }
    }
    return length;
}

}  // namespace

std::string printable(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    std::size_t at = 0;
    while (at < text.size()) {
        const auto c = static_cast<std::uint8_t>(text[at]);
        if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c < 0x20 || c == 0x7f) {
            out += hex_escape("\\x", c);
        } else if (c < 0x80) {
            out += static_cast<char>(c);
        } else if (const std::size_t length = utf8_length(text, at); length == 0) {
            out += hex_escape("\\x", c);
        } else {
            // U+0080 to U+009F are 0xc2 0x80 to 0xc2 0x9f; terminals may act on them as on ESC.
            const auto second = static_cast<std::uint8_t>(text[at + 1]);
            if (c == 0xc2 && second < 0xa0) {
                out += hex_escape("\\u00", second);
            } else {
                out.append(text.substr(at, length));
            }
            at += length;
            continue;
        }
        ++at;
    }
    return out;
}

}  // namespace vlattice
