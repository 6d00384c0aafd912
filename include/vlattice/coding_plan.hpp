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
#include <cstdint>
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

// The kind of a budget's candidate, which the budget then sizes: the ids alone (codec none), the
// scalar code, or a product or residual code of `bits` bits whose sub-spaces hold
// `dims_per_subspace` rotated dimensions each (0: the code covers every dimension).
struct CandidateKind {
    ResidualCodec codec = ResidualCodec::none;
    unsigned bits = 0;
    std::size_t dims_per_subspace = 0;

    bool operator==(const CandidateKind& other) const {
        return codec == other.codec && bits == other.bits && dims_per_subspace == other.dims_per_subspace;
    }
};

// A budget of the whole file per vector: everything write_vlat puts in the .vlat (header, anchors,
// packed ids, scalar ranges or rotation and codebook, codes, metadata) in at most
// floor(bytes_per_vector x n) bytes. The side data is paid by every vector, so on small sets it
// decides as much as the codes: such a budget also tries fewer anchors (file_budget_anchor_counts)
// and product codes over fewer rotated dimensions (ProductCodeConfig::rotated_dims).
struct FileBudget {
    double bytes_per_vector = 0.0;
    AnchorStorage storage = AnchorStorage::f32;  // how the file stores the anchors
    // Bytes set aside for the META section, whose text is known only once the choice is made; the
    // run's metadata takes a few KiB, and fit_and_train (pipeline.hpp) checks the whole file against
    // the budget once it is.
    std::uint64_t metadata_bytes = 8192;
    // Only candidates of this kind (with the ids alone and the scalar code, always measured).
    // fit_and_train tries every kind until an anchor count chooses a code, and at the counts after it
    // only that kind.
    std::optional<CandidateKind> only;
};

// The largest file a budget allows for n vectors: floor(bytes_per_vector x n).
std::uint64_t file_budget_total(const FileBudget& budget, std::size_t n);

// The anchor counts a whole-file budget tries, largest first: the largest three of `wanted` (at most
// n), wanted / 4, wanted / 16, ... down to 1 whose anchors, ids and metadata allowance fit the
// budget. Throws Error when not even one anchor fits, or the budget is not a finite number > 0.
std::vector<std::size_t> file_budget_anchor_counts(const FileBudget& budget, std::size_t n, std::size_t d,
                                                   std::size_t wanted);

struct CodingSpec {
    CodecFamily family = CodecFamily::automatic;
    // Code bytes per vector (packed id + residual code). Without it: the scalar code at `scalar_bits`
    // in every dimension, for family product ProductCodeConfig::subspaces sub-spaces (and stages), or
    // for family residual ProductCodeConfig::stages stages of one sub-space.
    std::optional<double> budget_bytes;
    // Or a budget of the whole file (not with budget_bytes): each candidate gets the code bytes its
    // side data leaves, and the ids alone are a candidate too.
    std::optional<FileBudget> file_budget;
    unsigned scalar_bits = 0;
    ProductCodeConfig product;
    // Rows held out of training to measure the candidates on: at most this many, and a tenth of n.
    std::size_t held_out = 8192;
    // The vectors the file will code, which its ids and a whole-file budget's side data are sized
    // for; 0: the points the coding trains on. More when a run trains on a sample (--train-sample).
    std::size_t file_vectors = 0;
};

// One coding the budget allowed, with the errors it gave.
struct CodingCandidate {
    CandidateKind kind;  // its codec among them
    std::string description;  // "product M = 30 x 8 bits", "scalar 392 x 4 bits"
    double code_bytes = 0.0;  // per vector, the id included
    double held_out_mse = 0.0;  // on rows held out of its training: what a budget minimises
    // The file's error, estimated: the held-out rows' error and that of as many training rows, each
    // weighed by how many of the file's rows it stands for.
    double file_mse = 0.0;
    // Under a whole-file budget: the file's bytes per vector with this code (the metadata counted at
    // what the budget sets aside for it); else 0.
    double file_bytes = 0.0;
    // Its training's stages, and "wall": from its start to its measured error. Candidates train side
    // by side on the GPU, so these show which one a budget waits for. Only the run report has them.
    StageSeconds seconds;
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
// rate.hpp; product codes of 8 and of 12 bits with as many sub-spaces as the bytes allow, at least
// 2 rotated dimensions each and 4 for 12-bit codes; for family residual, a residual code of as many 8-bit stages as the
// bytes allow, 2 to 64; under a whole-file budget also the ids alone, 4-bit product codes, and
// product codes over the M, 2 M and 4 M rotated dimensions of most variance (4 M only for 12-bit
// codes) beside those over all d, each with as many
// sub-spaces M as its side data leaves bytes for) on the rows not held out and keeps the one with the lowest
// error on the held-out rows, which it codes with a codebook that never saw them. A codebook codes
// the rows it trained on better (a residual code's stages, 2^b centroids over every dimension each,
// learn much of them), but what it learns of them it holds in its own bytes, which the budget does
// not count; each candidate also reports the file's error, estimated from the held-out rows and as
// many training rows, each weighed by the rows of the file it stands for. Never exceeds the budget.
// Throws Error when nothing fits it.
TrainedCoding train_coding(const Matrix& points, const Matrix& anchors, const std::vector<std::uint32_t>& assignments,
                           const CodingSpec& spec, Backend& backend);

// Whether train_coding reads the points for `spec`: for every coding but the ids alone with no budget.
bool coding_reads_points(const CodingSpec& spec);

}  // namespace vlattice
