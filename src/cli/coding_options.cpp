#include "coding_options.hpp"

#include "number_options.hpp"

#include "vlattice/format.hpp"
#include "vlattice/rate.hpp"
#include "vlattice/residual.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace vlattice::cli {

void add_coding_options(po::options_description& options, CodingArgs& a) {
    options.add_options()
        ("bits", whole_number(&a.bits, 0LL, 8LL)->default_value(CodingSpec{}.scalar_bits)->value_name("B"),
         "residual code width in every dimension: 0 (anchor ids only), 2, 4 or 8; each anchor's "
         "members set its own range per dimension")
        ("target-bytes", real_number(&a.target_bytes, {0.0, kUnbounded, true})->value_name("BYTES"),
         "budget of code bytes per vector (packed id + residual code, as FAISS counts code sizes): "
         "lowers M if the ids alone do not fit, then gives each dimension the width (0, 2, 4, 8 bits) "
         "that removes the most error for the bits left; never exceeds the budget, and a budget beyond what "
         "8-bit codes in every dimension take gets those (a note says so)")
        ("target-ratio", po::value(&a.target_ratio)->value_name("R"),
         "the same budget as a share of the float32 size (4 d bytes): 0.125 or 12.5%")
        ("codec", po::value(&a.codec)->default_value(a.codec)->value_name("FAMILY"),
         "residual code family a budget chooses from: auto (scalar and pq; the one with the lowest error on "
         "held-out vectors wins, and the candidates are printed with it and the file's error), scalar "
         "(per-anchor ranges, 0/2/4/8 bits per dimension), pq (a learned rotation, then M sub-spaces of 2^b "
         "centroids each), or rq (S additive stages of 2^b centroids over the whole residual, each coding what "
         "the stages before it left)")
        ("subspaces", whole_number(&a.subspaces, 0LL, 1LL << 20)->default_value(a.subspaces)->value_name("M"),
         "with --codec pq and no budget: the number of sub-spaces M (code bytes: S x M x pq-bits / 8)")
        ("stages", whole_number(&a.stages, 0LL, 1LL << 16)->default_value(a.stages)->value_name("S"),
         "with --codec rq and no budget: the number of additive stages S, at least 2 (code bytes: S x pq-bits "
         "/ 8); with --codec pq and --subspaces: stages of M sub-spaces each (default 1)")
        ("pq-bits", whole_number(&a.pq_bits, 4LL, 8LL)->default_value(a.pq_bits)->value_name("B"),
         "with --subspaces or --stages: bits per code, 4 or 8 (a budget tries 8 and 4 for pq, 8 for rq)")
        ("opq-iters", whole_number(&a.opq_iters, 0LL, 100LL)->default_value(a.opq_iters)->value_name("N"),
         "rounds that refine the product code's rotation (OPQ); 0 keeps the PCA start")
        ("opq-min-gain", real_number(&a.opq_min_gain, {0.0, 1.0, false, true})->default_value(a.opq_min_gain)
                             ->value_name("G"),
         "OPQ stops early once a round lowers the training error by less than this share of it; 0 runs "
         "every round");
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
    const CodecFamily family = [&] {
        try {
            return parse_codec_family(args.codec);
        } catch (const Error& e) {
            throw UsageError(std::string("--codec: ") + e.what());
        }
    }();
    require_option(args.pq_bits == 4 || args.pq_bits == 8, "--pq-bits", "4 or 8", args.pq_bits);
    const bool vector_code = family == CodecFamily::product || family == CodecFamily::residual;
    if (vector_code && !values["bits"].defaulted()) {
        throw UsageError(std::string("--bits sets the scalar code's width; --codec ") + args.codec + " takes " +
                         (family == CodecFamily::product ? "--subspaces" : "--stages") + " or a budget");
    }
    if (family == CodecFamily::product && !(bytes || ratio) && args.subspaces == 0) {
        throw UsageError("--codec pq needs --subspaces M or a --target-bytes/--target-ratio budget");
    }
    if (family == CodecFamily::residual && !(bytes || ratio) && args.stages < 2) {
        throw UsageError("--codec rq needs --stages S (at least 2) or a --target-bytes/--target-ratio budget");
    }
    if (args.subspaces > 0 && (family != CodecFamily::product || bytes || ratio)) {
        throw UsageError("--subspaces fixes the product code without a budget: give it with --codec pq and no budget");
    }
    const bool stages_allowed =
        family == CodecFamily::residual || (family == CodecFamily::product && args.subspaces > 0);
    if (args.stages > 0 && (bytes || ratio || !stages_allowed)) {
        throw UsageError("--stages fixes the code without a budget: give it with --codec rq, or with --codec pq "
                         "and --subspaces, and no budget");
    }
}

CodingSpec coding_spec(const po::variables_map& values, const CodingArgs& args, std::size_t d,
                       const AnnealConfig& config) {
    CodingSpec spec;
    spec.family = parse_codec_family(args.codec);
    spec.scalar_bits = static_cast<unsigned>(args.bits);
    if (values.count("target-bytes") > 0) {
        spec.budget_bytes = args.target_bytes;
    } else if (values.count("target-ratio") > 0) {
        spec.budget_bytes = parse_ratio(args.target_ratio) * 4.0 * static_cast<double>(d);
    }
    spec.product.subspaces = static_cast<std::size_t>(args.subspaces);
    spec.product.stages = args.stages > 0 ? static_cast<std::size_t>(args.stages) : 1;
    spec.product.bits = static_cast<unsigned>(args.pq_bits);
    spec.product.opq_iters = static_cast<int>(args.opq_iters);
    spec.product.opq_min_gain = args.opq_min_gain;
    spec.product.kmeans.seed = config.seed;
    spec.product.kmeans.threads = config.threads;
    return spec;
}

std::string budget_note(const CodingSpec& spec, std::size_t n, std::size_t m, std::size_t d) {
    if (!spec.budget_bytes) {
        return {};
    }
    const double best = assignment_bytes_per_vector(n, m) + static_cast<double>(d);
    if (*spec.budget_bytes <= best || spec.family == CodecFamily::product || spec.family == CodecFamily::residual) {
        return {};
    }
    return "the budget of " + show(*spec.budget_bytes) + " bytes per vector is more than the best coding takes (" +
           show(best) + " bytes per vector: 8-bit codes in every dimension beside the ids of " + std::to_string(m) +
           " anchors), which it gets";
}

std::string describe_coding(const VlatFile& file) {
    const std::size_t m = file.anchors.rows;
    std::string out = "m = " + std::to_string(m) + " (" + std::to_string(assignment_bits(m)) + "-bit ids), ";
    if (file.codec == ResidualCodec::product) {
        return out + "product code " + describe_product(file.product.book);
    }
    return out + "residuals " + (file.residuals.empty() ? std::string("none") : describe_widths(file.residuals.layout.bits));
}

std::string describe_candidates(const TrainedCoding& coding) {
    std::string out;
    for (std::size_t c = 0; c < coding.candidates.size(); ++c) {
        const CodingCandidate& candidate = coding.candidates[c];
        char line[256];
        std::snprintf(line, sizeof line, "  %s %-40s %6.2f code bytes  file MSE %-10.6g held-out %.6g\n",
                      c == coding.chosen ? "*" : " ", candidate.description.c_str(), candidate.code_bytes,
                      candidate.file_mse, candidate.held_out_mse);
        out += line;
    }
    return out;
}

}  // namespace vlattice::cli
