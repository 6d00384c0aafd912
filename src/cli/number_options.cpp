#include "number_options.hpp"

#include <charconv>
#include <cmath>
#include <system_error>

namespace vlattice::cli {

namespace {

// 2^k - 1 as "2^k)", the end of a half-open range, which reads better than its 19 digits; other
// values as "value]".
std::string upper_end(long long high) {
    const auto next = static_cast<unsigned long long>(high) + 1;
    if (high >= (1LL << 16) && (next & (next - 1)) == 0) {
        int k = 0;
        while ((1ULL << k) != next) {
            ++k;
        }
        return "2^" + std::to_string(k) + ")";
    }
    return std::to_string(high) + "]";
}

// The whole text as one number: no space, and no '+' (which std::stoll let through), as --seed and
// --nprobe read theirs.
template <class T>
bool read_all(const std::string& text, T& value) {
    const char* end = text.data() + text.size();
    const auto [stop, error] = std::from_chars(text.data(), end, value);
    return error == std::errc() && stop == end;
}

}  // namespace

std::string describe_whole_range(long long low, long long high) {
    return "a whole number in [" + std::to_string(low) + ", " + upper_end(high);
}

std::string describe_real_range(const RealRange& r) {
    if (std::isinf(r.high)) {
        return std::string("a finite number ") + (r.low_open ? "> " : ">= ") + show(r.low);
    }
    return std::string("a number in ") + (r.low_open ? "(" : "[") + show(r.low) + ", " + show(r.high) +
           (r.high_open ? ")" : "]");
}

void refuse_option_text(const std::string& rule, const std::string& text) {
    po::error_with_option_name error("%canonical_option% must be " + rule + ", got '%value%'");
    error.set_substitute("value", text);
    throw error;
}

long long parse_whole(const std::string& text, long long low, long long high) {
    long long value = 0;
    if (!read_all(text, value) || value < low || value > high) {
        refuse_option_text(describe_whole_range(low, high), text);
    }
    return value;
}

double parse_real(const std::string& text, const RealRange& r) {
    double value = 0.0;
    const bool in_range = read_all(text, value) && std::isfinite(value) &&
                          (r.low_open ? value > r.low : value >= r.low) &&
                          (r.high_open ? value < r.high : value <= r.high);
    if (!in_range) {
        refuse_option_text(describe_real_range(r), text);
    }
    return value;
}

}  // namespace vlattice::cli
