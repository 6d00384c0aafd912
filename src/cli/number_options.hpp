// Numeric options that read their own text: a value of the option's type within its range, or an
// error naming the option, the range and the text given. Boost's own reading of "99999999999999"
// for an int says only "the argument ('99999999999999') for option '--iters' is invalid", and
// reads "-1" for an unsigned type as its largest value.
#pragma once

#include "options.hpp"

#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace vlattice::cli {

inline constexpr double kUnbounded = std::numeric_limits<double>::infinity();

// The range of a real-valued option. An open end excludes its bound; an infinite high end reads as
// "any finite number above low".
struct RealRange {
    double low = 0.0;
    double high = kUnbounded;
    bool low_open = false;
    bool high_open = true;
};

// "a whole number in [1, 2^31)", "a number in [0, 1)", "a finite number > 0": how the errors below
// name a range.
std::string describe_whole_range(long long low, long long high);
std::string describe_real_range(const RealRange& range);

// Throws the Boost.Program_options error that the parser completes with the option's name:
// "<option> must be <rule>, got '<text>'".
[[noreturn]] void refuse_option_text(const std::string& rule, const std::string& text);

// The value of an option's text, refused (refuse_option_text) unless it is a whole number in
// [low, high] (decimal digits after an optional '-'), or a number in the range.
long long parse_whole(const std::string& text, long long low, long long high);
double parse_real(const std::string& text, const RealRange& range);

template <class T>
class WholeNumber final : public po::typed_value<T> {
    static_assert(std::is_integral_v<T> && std::is_signed_v<T> && sizeof(T) <= sizeof(long long),
                  "signed, so that a sign is read rather than wrapped");

public:
    WholeNumber(T* target, T low, T high) : po::typed_value<T>(target), low_(low), high_(high) {}
    void xparse(boost::any& store, const std::vector<std::string>& tokens) const override {
        store = static_cast<T>(parse_whole(tokens.empty() ? std::string() : tokens.back(), low_, high_));
    }

private:
    T low_;
    T high_;
};

class RealNumber final : public po::typed_value<double> {
public:
    RealNumber(double* target, RealRange range) : po::typed_value<double>(target), range_(range) {}
    void xparse(boost::any& store, const std::vector<std::string>& tokens) const override {
        store = parse_real(tokens.empty() ? std::string() : tokens.back(), range_);
    }

private:
    RealRange range_;
};

// po::value(target) for whole-number options, checked against [low, high].
template <class T>
WholeNumber<T>* whole_number(T* target, T low, T high = std::numeric_limits<T>::max()) {
    return new WholeNumber<T>(target, low, high);
}

// po::value(target) for real-valued options, checked against the range.
inline RealNumber* real_number(double* target, const RealRange& range) {
    return new RealNumber(target, range);
}

}  // namespace vlattice::cli
