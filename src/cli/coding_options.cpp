#include "coding_options.hpp"

#include "number_options.hpp"

#include "vlattice/format.hpp"
#include "vlattice/rate.hpp"
#include "vlattice/residual.hpp"

#include <cmath>
#include <cstdlib>

namespace vlattice::cli {

void add_coding_options(po::options_description& options, CodingArgs& a) {
    options.add_options()
        ("bits", whole_number(&a.bits, 0LL, 8LL)->default_value(CodingRequest{}.bits)->value_name("B"),
         "residual code width in every dimension: 0 (anchor ids only), 2, 4 or 8; each anchor's "
         "members set its own range per dimension")
        ("target-bytes", real_number(&a.target_bytes, {0.0, kUnbounded, true})->value_name("BYTES"),
         "budget of code bytes per vector (packed id + residual code, as FAISS counts code sizes): "
         "lowers M if the ids alone do not fit, then gives each dimension the width (0, 2, 4, 8 bits) "
         "that removes the most error for the bits left; never exceeds the budget, and a budget beyond what "
         "8-bit codes in every dimension take gets those (a note says so)")
        ("target-ratio", po::value(&a.target_ratio)->value_name("R"),
         "the same budget as a share of the float32 size (4 d bytes): 0.125 or 12.5%");
}

namespace {

double parse_ratio(const std::string& text) {
    const bool percent = !text.empty() && text.back() == '%';
    const std::string number = percent ? text.substr(0, text.size() - 1) : text;
    char* end = nullptr;
    const double value = std::strtod(number.c_str(), &end);
    if (number.empty() || end != number.c_str() + number.size() || !std::isfinite(value) || value <= 0.0 ||
        value > (percent ? 100.0 : 1.0)) {
        throw UsageError("--target-ratio must be a share of the float32 size in (0, 1] or (0%, 100%], got '" + text +
                         "'");
    }
    return percent ? value / 100.0 : value;
}

}  // namespace

bool budget_given(const po::variables_map& values) {
    return values.count("target-bytes") > 0 || values.count("target-ratio") > 0;
}

void check_coding_args(const po::variables_map& values, const CodingArgs& args) {
    const bool bytes = values.count("target-bytes") > 0;
    const bool ratio = values.count("target-ratio") > 0;
    require_option(args.bits >= 0 && args.bits <= 8 && is_residual_width(static_cast<unsigned>(args.bits)), "--bits",
                   "0, 2, 4 or 8", args.bits);
    if (bytes && ratio) {
        throw UsageError("--target-bytes and --target-ratio set the same budget: give one");
    }
    if ((bytes || ratio) && !values["bits"].defaulted()) {
        throw UsageError("--bits fixes the widths, and a --target-bytes or --target-ratio budget chooses them: give one");
    }
    if (ratio) {
        parse_ratio(args.target_ratio);
    }
}

CodingRequest coding_request(const po::variables_map& values, const CodingArgs& args, std::size_t d) {
    CodingRequest request;
    request.bits = static_cast<unsigned>(args.bits);
    if (values.count("target-bytes") > 0) {
        request.target_bytes = args.target_bytes;
    } else if (values.count("target-ratio") > 0) {
        request.target_bytes = parse_ratio(args.target_ratio) * 4.0 * static_cast<double>(d);
    }
    return request;
}

std::string budget_note(const CodingRequest& request, std::size_t n, std::size_t m, std::size_t d) {
    if (!request.target_bytes) {
        return {};
    }
    const double best = assignment_bytes_per_vector(n, m) + static_cast<double>(d);
    if (*request.target_bytes <= best) {
        return {};
    }
    return "the budget of " + show(*request.target_bytes) + " bytes per vector is more than the best coding takes (" +
           show(best) + " bytes per vector: 8-bit codes in every dimension beside the ids of " + std::to_string(m) +
           " anchors), which it gets";
}

std::string describe_coding(std::size_t m, const std::vector<std::uint8_t>& widths) {
    return "m = " + std::to_string(m) + " (" + std::to_string(assignment_bits(m)) + "-bit ids), residuals " +
           (widths.empty() ? std::string("none") : describe_widths(widths));
}

}  // namespace vlattice::cli
