// Choosing and training the residual code of a model: the scalar code or the product code, and their
// widths, by measuring each candidate's error on vectors held out of its training.
#pragma once

#include "vlattice/backend.hpp"
#include "vlattice/config.hpp"
#include "vlattice/format.hpp"
#include "vlattice/product_codes.hpp"
#include "vlattice/residual.hpp"
#include "vlattice/stage_seconds.hpp"
#include "vlattice/types.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace vlattice {

// --codec: which families a budget may choose from: the scalar code, product codes of one stage
// (pq), or residual codes, additive stages of one sub-space each (rq).
enum class CodecFamily { automatic, scalar, product, residual };
const char* codec_family_name(CodecFamily family);
// Throws Error naming the bad value.
CodecFamily parse_codec_family(const std::string& name);

struct CodingSpec {
    CodecFamily family = CodecFamily::automatic;
    // Code bytes per vector (packed id + residual code). Without it: the scalar code at `scalar_bits`
    // in every dimension, for family product ProductCodeConfig::subspaces sub-spaces (and stages), or
    // for family residual ProductCodeConfig::stages stages of one sub-space.
    std::optional<double> budget_bytes;
    unsigned scalar_bits = 0;
    ProductCodeConfig product;
    // Rows held out of training to measure the candidates on: at most this many, and a tenth of n.
    std::size_t held_out = 8192;
};

// One coding the budget allowed, with the errors it gave.
struct CodingCandidate {
    ResidualCodec codec = ResidualCodec::none;
    std::string description;  // "product M = 30 x 8 bits", "scalar 392 x 4 bits"
    double code_bytes = 0.0;  // per vector, the id included
    double held_out_mse = 0.0;  // on rows held out of its training: what a budget minimises
    // The file's error, estimated: the held-out rows' error and that of as many training rows, each
    // weighed by how many of the file's rows it stands for.
    double file_mse = 0.0;
};

// A trained residual code, not yet applied to any vector.
struct TrainedCoding {
    ResidualCodec codec = ResidualCodec::none;
    ResidualCodes scalar;     // widths and ranges, no codes (codec scalar)
    ProductCodebook product;  // (codec product)
    std::vector<CodingCandidate> candidates;  // in the order tried; empty without a budget
    std::size_t chosen = 0;
    StageSeconds seconds;  // training's stages: scalar, pq.* (train_product_codebook), measure
};

// Trains the coding `spec` asks for, for the anchors as a file stores them and the nearest-anchor
// assignments of `points`. With a budget it trains every candidate that fits (scalar widths from
// rate.hpp; product codes of 8 and of 4 bits with as many sub-spaces as the bytes allow, at least
// 2 rotated dimensions each; for family residual, a residual code of as many 8-bit stages as the
// bytes allow, 2 to 64) on the rows not held out and keeps the one with the lowest
// error on the held-out rows, which it codes with a codebook that never saw them. A codebook codes
// the rows it trained on better (a residual code's stages, 2^b centroids over every dimension each,
// learn much of them), but what it learns of them it holds in its own bytes, which the budget does
// not count; each candidate also reports the file's error, estimated from the held-out rows and as
// many training rows, each weighed by the rows of the file it stands for. Never exceeds the budget.
// Throws Error when nothing fits it.
TrainedCoding train_coding(const Matrix& points, const Matrix& anchors, const std::vector<std::uint32_t>& assignments,
                           const CodingSpec& spec, Backend& backend);

}  // namespace vlattice
