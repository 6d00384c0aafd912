#include "coding_options.hpp"

#include "number_options.hpp"

#include "vlattice/format.hpp"
#include "vlattice/rate.hpp"
#include "vlattice/residual.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <vector>
#include <cstdlib>

namespace vlattice::cli {

void add_coding_options(po::options_description& options, CodingArgs& a) {
    options.add_options()
        ("bits", whole_number(&a.bits, 0LL, 8LL)->default_value(CodingSpec{}.scalar_bits)->value_name("B"),
         "residual code width in every dimension: 0 (anchor ids only), 2, 4 or 8; each anchor's "
         "members set its own range per dimension")
        ("target-bytes", real_number(&a.target_bytes, {0.0, kUnbounded, true})->value_name("BYTES"),
         "budget of code bytes per vector (packed id + residual code, as FAISS counts code sizes): "
         "lowers M if the ids alone do not fit, then trains the candidates --codec allows with the bytes "
         "left (the scalar code, each dimension given the width of 0, 2, 4 or 8 bits that removes the most "
         "error; product codes of 8 and of 12 bits) and keeps the lowest held-out error; never exceeds the "
         "budget, and a budget beyond what 8-bit codes in every dimension take gets those (a note says so)")
        ("target-ratio", po::value(&a.target_ratio)->value_name("R"),
         "the same budget as a share of the float32 size (4 d bytes): 0.125 or 12.5%")
        ("target-file-bytes", real_number(&a.target_file_bytes, {0.0, kUnbounded, true})->value_name("BYTES"),
         "budget of the whole file per vector: header, anchors, ids, ranges or rotation and codebook, codes "
         "and metadata (8 KiB set aside for it) in at most BYTES x n bytes. Fits the largest 3 anchor counts "
         "of -m, -m/4, -m/16, ... that fit; each count trains the ids alone, the scalar code and product "
         "codes of 8, 4 and 12 bits over every rotated dimension or over 1, 2 or 4 per sub-space of the "
         "directions of most variance (a smaller rotation and codebook; 12-bit codes over 4 or more), each "
         "with the code bytes its side data leaves, until one chooses a code; the counts after it train the "
         "kind of code it chose and the scalar code; keeps the lowest held-out error")
        ("target-file-ratio", po::value(&a.target_file_ratio)->value_name("R"),
         "the same whole-file budget as a share of the float32 size (4 d bytes per vector): 0.03 or 3%")
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
        ("pq-bits", whole_number(&a.pq_bits, 4LL, 12LL)->default_value(a.pq_bits)->value_name("B"),
         "with --subspaces or --stages: bits per code, 4, 8 or 12 (for pq a code budget tries 8 and 12, a "
         "whole-file budget 8, 4 and 12; 8 for rq)")
        ("opq-iters", whole_number(&a.opq_iters, 0LL, 100LL)->default_value(a.opq_iters)->value_name("N"),
         "rounds that refine the product code's rotation (OPQ); 0 keeps the PCA start")
        ("opq-min-gain", real_number(&a.opq_min_gain, {0.0, 1.0, false, true})->default_value(a.opq_min_gain)
                             ->value_name("G"),
         "OPQ stops early once a round lowers the error of the sample rows it does not train on (one in "
         "eight) by less than this share of it, keeping the better rotation; 0 runs every round");
}

namespace {

double parse_ratio(const std::string& option, const std::string& text) {
    const bool percent = !text.empty() && text.back() == '%';
    const std::string number = percent ? text.substr(0, text.size() - 1) : text;
    char* end = nullptr;
    const double value = std::strtod(number.c_str(), &end);
    if (number.empty() || end != number.c_str() + number.size() || !std::isfinite(value) || value <= 0.0 ||
        value > (percent ? 100.0 : 1.0)) {
        throw UsageError(option + " must be a share of the float32 size in (0, 1] or (0%, 100%], got '" + text +
                         "'");
    }
    return percent ? value / 100.0 : value;
}

const char* const kBudgetOptions[] = {"target-bytes", "target-ratio", "target-file-bytes", "target-file-ratio"};

}  // namespace

bool budget_given(const po::variables_map& values) {
    return std::any_of(std::begin(kBudgetOptions), std::end(kBudgetOptions),
                       [&](const char* name) { return values.count(name) > 0; });
}

void check_coding_args(const po::variables_map& values, const CodingArgs& args) {
    std::vector<std::string> budgets;
    for (const char* name : kBudgetOptions) {
        if (values.count(name) > 0) {
            budgets.push_back(std::string("--") + name);
        }
    }
    const bool budget = !budgets.empty();
    require_option(args.bits >= 0 && args.bits <= 8 && is_residual_width(static_cast<unsigned>(args.bits)), "--bits",
                   "0, 2, 4 or 8", args.bits);
    if (budgets.size() > 1) {
        throw UsageError(budgets[0] + " and " + budgets[1] + " each set a budget: give one");
    }
    if (budget && !values["bits"].defaulted()) {
        throw UsageError("--bits fixes the widths, and a " + budgets[0] + " budget chooses them: give one");
    }
    if (values.count("target-ratio") > 0) {
        parse_ratio("--target-ratio", args.target_ratio);
    }
    if (values.count("target-file-ratio") > 0) {
        parse_ratio("--target-file-ratio", args.target_file_ratio);
    }
    const CodecFamily family = [&] {
        try {
            return parse_codec_family(args.codec);
        } catch (const Error& e) {
            throw UsageError(std::string("--codec: ") + e.what());
        }
    }();
    require_option(is_product_code_bits(static_cast<unsigned>(args.pq_bits)), "--pq-bits", "4, 8 or 12", args.pq_bits);
    const bool vector_code = family == CodecFamily::product || family == CodecFamily::residual;
    if (vector_code && !values["bits"].defaulted()) {
        throw UsageError(std::string("--bits sets the scalar code's width; --codec ") + args.codec + " takes " +
                         (family == CodecFamily::product ? "--subspaces" : "--stages") + " or a budget");
    }
    if (family == CodecFamily::product && !budget && args.subspaces == 0) {
        throw UsageError("--codec pq needs --subspaces M or a budget (--target-bytes, --target-ratio, "
                         "--target-file-bytes or --target-file-ratio)");
    }
    if (family == CodecFamily::residual && !budget && args.stages < 2) {
        throw UsageError("--codec rq needs --stages S (at least 2) or a budget (--target-bytes, --target-ratio, "
                         "--target-file-bytes or --target-file-ratio)");
    }
    if (args.subspaces > 0 && (family != CodecFamily::product || budget)) {
        throw UsageError("--subspaces fixes the product code without a budget: give it with --codec pq and no budget");
    }
    const bool stages_allowed =
        family == CodecFamily::residual || (family == CodecFamily::product && args.subspaces > 0);
    if (args.stages > 0 && (budget || !stages_allowed)) {
        throw UsageError("--stages fixes the code without a budget: give it with --codec rq, or with --codec pq "
                         "and --subspaces, and no budget");
    }
}

CodingSpec coding_spec(const po::variables_map& values, const CodingArgs& args, std::size_t d,
                       const AnnealConfig& config) {
    CodingSpec spec;
    spec.family = parse_codec_family(args.codec);
    spec.scalar_bits = static_cast<unsigned>(args.bits);
    const double float32_bytes = 4.0 * static_cast<double>(d);
    if (values.count("target-bytes") > 0) {
        spec.budget_bytes = args.target_bytes;
    } else if (values.count("target-ratio") > 0) {
        spec.budget_bytes = parse_ratio("--target-ratio", args.target_ratio) * float32_bytes;
    } else if (values.count("target-file-bytes") > 0) {
        spec.file_budget.emplace().bytes_per_vector = args.target_file_bytes;
    } else if (values.count("target-file-ratio") > 0) {
        spec.file_budget.emplace().bytes_per_vector =
            parse_ratio("--target-file-ratio", args.target_file_ratio) * float32_bytes;
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
        char file_bytes[32] = "";
        if (candidate.file_bytes > 0.0) {
            std::snprintf(file_bytes, sizeof file_bytes, "  %7.2f file bytes", candidate.file_bytes);
        }
        char line[320];
        std::snprintf(line, sizeof line, "  %s %-40s %6.2f code bytes%s  file MSE %-10.6g held-out %.6g\n",
                      c == coding.chosen ? "*" : " ", candidate.description.c_str(), candidate.code_bytes, file_bytes,
                      candidate.file_mse, candidate.held_out_mse);
        out += line;
    }
    return out;
}

std::string describe_trials(const TrainedRun& run) {
    std::string out;
    for (std::size_t t = 0; t < run.trials.size(); ++t) {
        const TrainedCoding& coding = run.trials[t].coding;
        if (coding.candidates.empty()) {
            continue;
        }
        if (run.trials.size() == 1) {
            out += "candidates  measured (* chosen: the lowest held-out MSE):\n";
        } else {
            out += "candidates  with m = " + std::to_string(run.trials[t].anchors) + " anchors" +
                   (t == run.chosen ? ", kept (the lowest held-out MSE of every count)" : "") + ":\n";
        }
        out += describe_candidates(coding);
    }
    return out;
}

std::string describe_counts(const std::vector<std::size_t>& counts) {
    std::string out;
    for (std::size_t c = 0; c < counts.size(); ++c) {
        out += (c == 0 ? "" : c + 1 == counts.size() ? " and " : ", ") + std::to_string(counts[c]);
    }
    return out;
}

}  // namespace vlattice::cli
