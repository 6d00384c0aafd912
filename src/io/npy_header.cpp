#include "io/npy_header.hpp"

#include "vlattice/types.hpp"

#include <cctype>
#include <optional>

namespace vlattice::io {

namespace {

class HeaderParser {
public:
    HeaderParser(const std::string& path, const std::string& text) : path_(path), text_(text) {}

    NpyHeader parse() {
        std::optional<std::string> descr;
        std::optional<bool> fortran_order;
        std::optional<std::vector<std::uint64_t>> shape;
        expect('{');
        while (!accept('}')) {
            const std::string key = string_literal();
            expect(':');
            if (key == "descr") {
                descr = descr_value();
            } else if (key == "fortran_order") {
                fortran_order = bool_literal(key);
            } else if (key == "shape") {
                shape = tuple_literal();
            } else {
                throw Error(path_ + ": .npy header has an unexpected field '" + key + "'");
            }
            if (!accept(',')) {
                expect('}');
                break;
            }
        }
        if (!descr || !fortran_order || !shape) {
            const char* missing = !descr ? "descr" : !fortran_order ? "fortran_order" : "shape";
            throw Error(path_ + ": .npy header has no '" + missing + "' field");
        }
        return NpyHeader{*descr, *fortran_order, *shape};
    }

private:
    [[noreturn]] void malformed(const std::string& expected) const {
        throw Error(path_ + ": malformed .npy header: expected " + expected + " at character " +
                    std::to_string(pos_) + " of " + text_);
    }

    void skip_space() {
        while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) {
            ++pos_;
        }
    }

    bool accept(char c) {
        skip_space();
        if (pos_ < text_.size() && text_[pos_] == c) {
            ++pos_;
            return true;
        }
        return false;
    }

    void expect(char c) {
        if (!accept(c)) {
            malformed(std::string("'") + c + "'");
        }
    }

    std::string string_literal() {
        skip_space();
        if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) {
            malformed("a quoted string");
        }
        const char quote = text_[pos_++];
        const std::size_t end = text_.find(quote, pos_);
        if (end == std::string::npos) {
            malformed("a closing quote");
        }
        std::string value = text_.substr(pos_, end - pos_);
        pos_ = end + 1;
        return value;
    }

    std::string descr_value() {
        skip_space();
        if (pos_ < text_.size() && text_[pos_] == '[') {
            throw Error(path_ + ": .npy header field 'descr' is a structured dtype; only plain arrays are read");
        }
        return string_literal();
    }

    bool accept_word(const std::string& word) {
        skip_space();
        if (text_.compare(pos_, word.size(), word) == 0) {
            pos_ += word.size();
            return true;
        }
        return false;
    }

    bool bool_literal(const std::string& key) {
        if (accept_word("True")) {
            return true;
        }
        if (accept_word("False")) {
            return false;
        }
        throw Error(path_ + ": .npy header field '" + key + "' is not True or False");
    }

    std::uint64_t integer_literal() {
        skip_space();
        const std::size_t start = pos_;
        std::uint64_t value = 0;
        while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
            const std::uint64_t digit = static_cast<std::uint64_t>(text_[pos_] - '0');
            if (__builtin_mul_overflow(value, 10, &value) || __builtin_add_overflow(value, digit, &value)) {
                throw Error(path_ + ": .npy header field 'shape' has a dimension too large for 64 bits");
            }
            ++pos_;
        }
        if (pos_ == start) {
            malformed("a non-negative integer in 'shape'");
        }
        // Files written by Python 2 numpy spell long integers with a trailing L.
        if (pos_ < text_.size() && text_[pos_] == 'L') {
            ++pos_;
        }
        return value;
    }

    std::vector<std::uint64_t> tuple_literal() {
        expect('(');
        std::vector<std::uint64_t> values;
        while (!accept(')')) {
            values.push_back(integer_literal());
            if (!accept(',')) {
                expect(')');
                break;
            }
        }
        return values;
    }

    const std::string& path_;
    const std::string& text_;
    std::size_t pos_ = 0;
};

}  // namespace

NpyHeader parse_npy_header(const std::string& path, const std::string& text) {
    return HeaderParser(path, text).parse();
}

std::string format_npy_header(std::uint64_t rows, std::uint64_t cols) {
    constexpr std::size_t kPreambleBytes = 10;  // magic, version 1.0, uint16 header length
    constexpr std::size_t kAlignment = 64;
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(rows) + ", " +
                         std::to_string(cols) + "), }";
    const std::size_t unpadded = kPreambleBytes + header.size() + 1;
    header.append((kAlignment - unpadded % kAlignment) % kAlignment, ' ');
    header.push_back('\n');
    return header;
}

}  // namespace vlattice::io
