// Product codes of the residual r = x - c(a): the residual is rotated, z = R r, by a learned matrix R
// with orthonormal rows (OPQ), the rotated coordinates are cut into M sub-spaces of consecutive
// coordinates, and each sub-space stores the id of the nearest of 2^b centroids (b = 4, 8 or 12). With
// S > 1 additive stages the code is residual: stage s codes what the stages before it left of z,
// with a product code of its own over the same sub-spaces, and z decodes to the sum of every
// stage's centroids (M = 1 is plain residual quantisation). The rotation and the centroids are
// trained by the annealed k-means (fit) on any Backend; encoding picks each sub-space's nearest
// centroid stage by stage, by distances in double summed in a written-out order, which the GPU
// repeats, so the CPU and the GPU write the same codes for the same model.
#pragma once

#include "vlattice/backend.hpp"
#include "vlattice/config.hpp"
#include "vlattice/stage_seconds.hpp"
#include "vlattice/types.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace vlattice {

// The code widths a sub-space may have. At the same bits per vector, fewer sub-spaces of more
// centroids code more of the dependence between coordinates (the product quantiser's own trade-off):
// 12-bit codes pay for it with 16 times the centroids to train, store and search.
inline constexpr std::array<unsigned, 3> kProductCodeBits = {4, 8, 12};
bool is_product_code_bits(unsigned bits);

// What `train` learns and `encode` reuses: the rotation and the sub-space centroids of every stage.
struct ProductCodebook {
    unsigned bits = 8;  // b: each sub-space code is b bits, 2^b centroids
    // S additive stages, each a product code over the same sub-spaces; 1 is a plain product code.
    std::size_t stages = 1;
    // p x d with orthonormal rows (p <= d): rotated coordinate t of a residual r is
    // z[t] = sum_k R[t][k] r[k]. Coordinates past p are not coded; they decode to 0.
    Matrix rotation;
    // M + 1 increasing offsets, bounds[0] = 0 and bounds[M] = p: sub-space j holds rotated
    // coordinates [bounds[j], bounds[j + 1]).
    std::vector<std::uint32_t> bounds;
    // (S * 2^b) x p: row s * 2^b + c holds centroid c of every sub-space of stage s, each in its own
    // columns.
    Matrix centroids;

    std::size_t subspaces() const { return bounds.empty() ? 0 : bounds.size() - 1; }
    std::size_t coded_dims() const { return rotation.rows; }
    std::size_t table() const { return std::size_t{1} << bits; }
    // Codes per vector, S x M, stage by stage: code j is sub-space j % M of stage j / M.
    std::size_t codes() const { return stages * subspaces(); }
    // Bytes of one vector's code: S x M codes of b bits, packed least significant bit first.
    std::size_t code_bytes() const { return (codes() * bits + 7) / 8; }
    bool empty() const { return subspaces() == 0; }
    // Centroid c of code j, indexed by rotated coordinate (its sub-space's columns are the ones used).
    const float* centroid(std::size_t j, unsigned c) const { return centroids.row(j / subspaces() * table() + c); }
};

struct ProductCodes {
    ProductCodebook book;
    std::vector<std::uint8_t> codes;  // n x book.code_bytes(), vector by vector

    bool empty() const { return book.empty(); }
};

// Throws Error naming the field unless the codebook's parts fit together for dimension d: bits 4, 8
// or 12, 1 <= M, 1 <= S, bounds increasing from 0 to p <= d, rotation p x d, centroids S 2^b x p, every value
// finite, the rotation's rows orthonormal to 1e-4 (what a damaged file cannot meet), and decoding
// bounded (every decoded value finite for anchors up to anchor_bound in magnitude).
void check_product_codebook(const ProductCodebook& book, std::size_t d, double anchor_bound);

// Throws Error naming the vector unless `codes` holds n codes of codes.book.code_bytes() bytes whose
// unused high bits (the high nibble of the last byte, for b = 4 or 12 and S M odd) are zero, as a file
// stores them. The codes themselves cannot be out of range: b bits address all 2^b centroids.
void check_product_code_bytes(const ProductCodes& codes, std::uint64_t n);

// Code j of a vector, from its packed code bytes (least significant bit first: a 12-bit code spans
// two bytes).
inline unsigned product_code(const std::uint8_t* code, unsigned bits, std::size_t j) {
    if (bits == 8) {
        return code[j];
    }
    if (bits == 4) {
        return (code[j / 2] >> (4 * (j % 2))) & 0xfu;
    }
    const std::size_t bit = 12 * j;
    const unsigned pair = code[bit / 8] | static_cast<unsigned>(code[bit / 8 + 1]) << 8;
    return (pair >> (bit % 8)) & 0xfffu;
}

// Rotated residuals z = R (x - c(a)) for every row of `points`, p columns, each coordinate summed
// over k = 0, 1, ..., d - 1 in float in that order (no fused multiply-add), so that every machine
// computes the same bits (the GPU repeats it).
Matrix rotate_residuals(const ProductCodebook& book, const Matrix& points, const Matrix& anchors,
                        const std::vector<std::uint32_t>& assignments);

// Learns the rotation and the centroids from the residuals of `points` against `anchors` as a file
// will store them (config: ProductCodeConfig). Every sub-space's centroids are a fit() on
// `backend`. `seconds`, when given, receives the time of each stage (pq.start, pq.rotate,
// pq.centroids, pq.procrustes).
ProductCodebook train_product_codebook(const Matrix& points, const Matrix& anchors,
                                       const std::vector<std::uint32_t>& assignments,
                                       const ProductCodeConfig& config, Backend& backend,
                                       StageSeconds* seconds = nullptr);

// The same, trained on the listed rows of `points` alone (increasing, each below points.rows;
// `assignments` has every row's): the codebook of those rows copied out first, without the copy.
ProductCodebook train_product_codebook(const Matrix& points, const std::vector<std::uint32_t>& rows,
                                       const Matrix& anchors, const std::vector<std::uint32_t>& assignments,
                                       const ProductCodeConfig& config, Backend& backend,
                                       StageSeconds* seconds = nullptr);

// Each vector's code, stage by stage: per sub-space j of stage s, the centroid c minimising
//   sum over t in [bounds[j], bounds[j + 1]) of (double(u[t]) - double(centroid[c][t]))^2,
// summed from +0 in increasing t, each square and sum rounded to double on its own (no fused
// multiply-add), ties to the lowest c, where u is what is left to code: the rotated residual
// (rotate_residuals) at stage 0, and after each stage u[t] <- u[t] - (its chosen centroid)[t] in
// float. By backend.encode_product: the CPU's or the GPU's, the same bytes. n x book.code_bytes()
// bytes.
// `seconds`, when given, receives the time of each stage (codes).
std::vector<std::uint8_t> encode_product(const ProductCodebook& book, const Matrix& points, const Matrix& anchors,
                                         const std::vector<std::uint32_t>& assignments, Backend& backend,
                                         StageSeconds* seconds = nullptr);

// The CPU's encode_product, after its checks (what Backend::encode_product does by default).
std::vector<std::uint8_t> encode_product_on_cpu(const ProductCodebook& book, const Matrix& points,
                                                const Matrix& anchors, const std::vector<std::uint32_t>& assignments);

// Packs per-vector centroid ids (n x S M, row by row, code order) into n x code_bytes() code bytes.
std::vector<std::uint8_t> pack_product_codes(const ProductCodebook& book, const std::vector<std::uint16_t>& ids,
                                             std::size_t n);

// The rotated coordinates a code decodes to, z[0..p): stage 0's centroid values, then each later
// stage's added in float, stage by stage.
void code_values(const ProductCodebook& book, const std::uint8_t* code, float* z);

// Vector i's reconstruction y[k] = c[k] + s[k], s[k] = sum over t = 0, 1, ..., p - 1 of
// R[t][k] * z[t] in float in that order (s starts at 0), z = code_values of its code.
// Writes out[0..d).
void decode_product_row(const Matrix& anchors, const ProductCodes& codes, std::uint32_t anchor, std::size_t i,
                        float* out);

// "M = 98 x 8 bits over 784 rotated dimensions", with "in S stages" when S > 1: for info and reports.
std::string describe_product(const ProductCodebook& book);

// The codes per vector, for messages: "M = 3", or "S x M = 4 x 3" with stages.
std::string describe_code_count(const ProductCodebook& book);

}  // namespace vlattice
