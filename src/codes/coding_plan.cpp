// Choosing the residual code by measurement (include/vlattice/coding_plan.hpp).
#include "vlattice/coding_plan.hpp"

#include "numeric.hpp"
#include "random.hpp"
#include "vlattice/rate.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace vlattice {

const char* codec_family_name(CodecFamily family) {
    switch (family) {
    case CodecFamily::scalar:
        return "scalar";
    case CodecFamily::product:
        return "pq";
    case CodecFamily::automatic:
        break;
    }
    return "auto";
}

CodecFamily parse_codec_family(const std::string& name) {
    for (const CodecFamily family : {CodecFamily::automatic, CodecFamily::scalar, CodecFamily::product}) {
        if (name == codec_family_name(family)) {
            return family;
        }
    }
    throw Error("unknown codec '" + name + "' (expected auto, scalar or pq)");
}

namespace {

// Rows a budget's candidates are measured on, and the rest, which the product codes train on.
struct HeldOut {
    std::vector<std::uint32_t> measured;
    std::vector<std::uint32_t> training;
};

HeldOut hold_out(std::size_t n, std::size_t most, std::uint64_t seed) {
    const std::size_t count = std::max<std::size_t>(1, std::min(most, n / 10));
    std::vector<std::uint32_t> order(n);
    std::iota(order.begin(), order.end(), 0u);
    Random random(seed);
    for (std::size_t i = 0; i < count; ++i) {
        std::swap(order[i], order[i + random.below(n - i)]);
    }
    HeldOut out;
    out.measured.assign(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(count));
    out.training.assign(order.begin() + static_cast<std::ptrdiff_t>(count), order.end());
    std::sort(out.measured.begin(), out.measured.end());
    std::sort(out.training.begin(), out.training.end());
    // A set too small to split is measured on the rows it trains on.
    if (out.training.empty()) {
        out.training = out.measured;
    }
    return out;
}

std::vector<std::uint32_t> pick(const std::vector<std::uint32_t>& values, const std::vector<std::uint32_t>& rows) {
    std::vector<std::uint32_t> out(rows.size());
    for (std::size_t r = 0; r < rows.size(); ++r) {
        out[r] = values[rows[r]];
    }
    return out;
}

// Mean over rows of the squared distance between each row and what decode(i, out) reconstructs, the
// same on any number of threads.
template <class Decode>
double mean_error(const Matrix& points, Decode decode) {
    const std::size_t d = points.cols;
    const double total = deterministic_sum(
        points.rows,
        [&](std::size_t i) {
            thread_local std::vector<float> decoded;
            decoded.resize(d);
            decode(i, decoded.data());
            double sum = 0.0;
            for (std::size_t k = 0; k < d; ++k) {
                const double e = static_cast<double>(points.row(i)[k]) - decoded[k];
                sum += e * e;
            }
            return sum;
        },
        d);
    return total / static_cast<double>(points.rows);
}

double product_mse(const ProductCodebook& book, const Matrix& points, const Matrix& anchors,
                   const std::vector<std::uint32_t>& assignments, Backend& backend) {
    const ProductCodes codes{book, encode_product(book, points, anchors, assignments, backend)};
    return mean_error(points, [&](std::size_t i, float* out) { decode_product_row(anchors, codes, assignments[i], i, out); });
}

double scalar_mse(const ResidualCodes& ranges, const Matrix& points, const Matrix& anchors,
                  const std::vector<std::uint32_t>& assignments) {
    ResidualCodes codes = ranges;
    encode_with_ranges(codes, points, anchors, assignments);
    return mean_error(points, [&](std::size_t i, float* out) { decode_row(anchors, codes, assignments[i], i, out); });
}

ProductCodebook train_product(const Matrix& training, const Matrix& anchors,
                              const std::vector<std::uint32_t>& assignments, ProductCodeConfig config,
                              unsigned bits, std::size_t subspaces, Backend& backend, StageSeconds& seconds) {
    config.bits = bits;
    config.subspaces = subspaces;
    return train_product_codebook(training, anchors, assignments, config, backend, &seconds);
}

std::string product_description(unsigned bits, std::size_t subspaces) {
    return "pq M = " + std::to_string(subspaces) + " x " + std::to_string(bits) + " bits";
}

TrainedCoding fixed_coding(const Matrix& points, const Matrix& anchors, const std::vector<std::uint32_t>& assignments,
                           const CodingSpec& spec, Backend& backend) {
    TrainedCoding out;
    if (spec.family == CodecFamily::product) {
        if (spec.product.subspaces == 0) {
            throw Error("the product code needs a number of sub-spaces or a byte budget");
        }
        out.codec = ResidualCodec::product;
        out.product = train_product(points, anchors, assignments, spec.product, spec.product.bits,
                                    spec.product.subspaces, backend, out.seconds);
    } else if (spec.scalar_bits > 0) {
        out.codec = ResidualCodec::scalar;
        out.scalar = learn_residual_ranges(points, anchors, assignments,
                                           std::vector<std::uint8_t>(points.cols, static_cast<std::uint8_t>(spec.scalar_bits)));
    }
    return out;
}

}  // namespace

TrainedCoding train_coding(const Matrix& points, const Matrix& anchors, const std::vector<std::uint32_t>& assignments,
                           const CodingSpec& spec, Backend& backend) {
    if (!spec.budget_bytes) {
        return fixed_coding(points, anchors, assignments, spec, backend);
    }
    const std::size_t n = points.rows;
    const std::size_t d = points.cols;
    const double id_bytes = assignment_bytes_per_vector(n, anchors.rows);
    const double left = *spec.budget_bytes - id_bytes;
    TrainedCoding out;
    if (left < 1.0) {
        return out;
    }
    const HeldOut rows = hold_out(n, spec.held_out, spec.product.kmeans.seed);
    const Matrix measured = select_rows(points, rows.measured);
    const std::vector<std::uint32_t> measured_assignments = pick(assignments, rows.measured);

    std::vector<ResidualCodes> scalars;
    std::vector<ProductCodebook> products;
    if (spec.family != CodecFamily::product) {
        const std::size_t bytes = residual_bytes_within(*spec.budget_bytes, n, anchors.rows, d);
        const std::vector<std::uint8_t> widths = out.seconds.time("scalar", [&] {
            return allocate_widths(points, anchors, assignments, 8 * bytes);
        });
        scalars.push_back(out.seconds.time("scalar", [&] { return learn_residual_ranges(points, anchors, assignments, widths); }));
        CodingCandidate candidate;
        candidate.codec = ResidualCodec::scalar;
        candidate.description = "scalar " + describe_widths(widths);
        candidate.code_bytes = id_bytes + static_cast<double>(scalars.back().layout.code_bytes);
        candidate.held_out_mse =
            out.seconds.time("measure", [&] { return scalar_mse(scalars.back(), measured, anchors, measured_assignments); });
        out.candidates.push_back(candidate);
    }
    if (spec.family != CodecFamily::scalar) {
        const Matrix training = select_rows(points, rows.training);
        const std::vector<std::uint32_t> training_assignments = pick(assignments, rows.training);
        for (const unsigned bits : {8u, 4u}) {
            // Whole code bytes: an odd number of 4-bit codes still takes its last byte.
            const auto subspaces = static_cast<std::size_t>(std::floor(left)) * 8 / bits;
            // A sub-space of one rotated dimension is a scalar code; the scalar family covers those rates.
            if (subspaces == 0 || 2 * subspaces > d) {
                continue;
            }
            products.push_back(train_product(training, anchors, training_assignments, spec.product, bits, subspaces,
                                             backend, out.seconds));
            CodingCandidate candidate;
            candidate.codec = ResidualCodec::product;
            candidate.description = product_description(bits, subspaces);
            candidate.code_bytes = id_bytes + static_cast<double>(products.back().code_bytes());
            candidate.held_out_mse = out.seconds.time("measure", [&] {
                return product_mse(products.back(), measured, anchors, measured_assignments, backend);
            });
            out.candidates.push_back(candidate);
        }
    }
    if (out.candidates.empty()) {
        throw Error("no " + std::string(codec_family_name(spec.family)) + " code fits a budget of " +
                    std::to_string(*spec.budget_bytes) + " bytes per vector beside the anchor ids");
    }
    std::size_t best = 0;
    for (std::size_t c = 1; c < out.candidates.size(); ++c) {
        if (out.candidates[c].held_out_mse < out.candidates[best].held_out_mse) {
            best = c;
        }
    }
    out.chosen = best;
    out.codec = out.candidates[best].codec;
    const std::size_t scalar_count = scalars.size();
    if (out.codec == ResidualCodec::scalar) {
        out.scalar = scalars[best];
    } else {
        out.product = products[best - scalar_count];
    }
    return out;
}

}  // namespace vlattice
