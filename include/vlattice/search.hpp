// k-nearest-neighbour search over a compressed set, IVF style: each query is scored against the
// anchors, and the members of its `nprobe` best anchors are ranked by their score against their
// reconstruction (anchor plus decoded residual): the squared L2 distance, or for a file of metric
// ip the inner product, largest first. Product-coded files are ranked by asymmetric distance through
// per-query lookup tables instead (below), optionally re-ranked by their reconstruction.
#pragma once

#include "vlattice/format.hpp"
#include "vlattice/types.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace vlattice {

struct SearchOptions {
    std::size_t k = 10;      // neighbours per query, >= 1
    std::size_t nprobe = 0;  // anchors visited per query; 0 or >= m visits every anchor (exhaustive)
    // The CPU decodes each probed list once for a block of queries, holding at most this many floats
    // (256 MiB: all of Fashion-MNIST, so its exhaustive search decodes each vector once per 1,024
    // queries); a block that would need more is split. The answer does not depend on it.
    std::size_t cache_floats = std::size_t{64} << 20;
    // Product codes only: the best max(k, rerank) vectors by asymmetric distance are scored again
    // against their reconstruction (decode_product_row), and the k best of those returned with those
    // scores. 0 returns the asymmetric distances. Other files are already ranked by their
    // reconstruction, so it changes nothing there.
    std::size_t rerank = 0;
};

// The arithmetic is fixed so that the CPU and the GPU return the same bits: a score is
// ordered_squared_distance (src/numeric.hpp) in float between the query and the anchor or the
// reconstruction (decode_row), or for metric ip the inner product's inner_product_score
// (src/search/search_scores.hpp: 0 - ordered_dot); the probed anchors are the nprobe smallest by (score,
// anchor id) and the neighbours the k smallest by (score, vector id). So ip takes the largest inner
// products, ties to the lowest id.
//
// Product codes (ResidualCodec::product) are scored by asymmetric distance (ADC), without decoding:
// the reconstruction is y = c + R^T z (product_codes.hpp), and as R has orthonormal rows,
// ||q - y||^2 = ||q - c||^2 + sum_t z[t] (z[t] + 2 (Rc)[t]) - 2 sum_t (Rq)[t] z[t] and
// q . y = q . c + sum_t (Rq)[t] z[t], for any p <= d. Each term is computed once: the first per
// query and anchor, the second per vector, the last through one lookup table per query. In float,
// every sum starting at +0 and running in the order given, no fused multiply-add:
// - Rq[t] = sum over k = 0 .. d-1 of R[t][k] * q[k]; Rc[t] likewise for anchor c.
// - Per vector, e = sum over t = 0 .. p-1 of z[t] * (z[t] + 2 * Rc[t]), z = code_values of its code
//   (metric l2 and angular only).
// - Per query and code j (sub-space j % M of stage j / M), Q_j[c] = sum over t in its sub-space, in
//   increasing order, of Rq[t] * centroid c's value at t. The lookups are the code bytes for codes of
//   4 or 8 bits and the codes for 12-bit ones: lookup u's table T_u is Q_u for 8- and 12-bit codes,
//   and for 4-bit ones T_u[x] = Q_2u[x & 15] + Q_2u+1[x >> 4] for x < 256 (Q_2u[x & 15] alone for
//   the last byte of an odd number of codes). As z is the sum of every stage's centroids,
//   sum_t (Rq)[t] z[t] is the sum of every code's Q_j.
// - S = sum over the lookups u, in order, of T_u[the code byte or the code u].
// - With P the anchor's probe score above: l2 and angular score x = (P + e) - (S + S), taken as is
//   when x > 0, as +0 when x <= 0 (rounding below an exact 0) and as +infinity when x is NaN; ip
//   scores inner_product_score((0 - P) + S), where 0 - P = ordered_dot(q, c) (and a NaN product
//   scores +infinity either way).
// The neighbours are the k smallest by (score, vector id); with SearchOptions::rerank the best
// max(k, rerank) by that order are scored again as above against decode_product_row, and the k
// smallest by (that score, id) returned.
struct Neighbors {
    std::size_t queries = 0;
    std::size_t k = 0;
    std::vector<std::int64_t> ids;   // queries x k; -1 where fewer than k vectors were visited
    // queries x k: squared L2 distances, +infinity where ids is -1; for metric ip inner products,
    // -infinity where ids is -1.
    std::vector<float> distances;
    std::uint64_t visited = 0;       // vectors scored over all queries (a re-rank's not counted again)
};

// Throws Error when the query dimension is not the file's, k is 0, or the file's parts do not fit
// together (check_compressed_set): what both searches check first.
void check_search(const VlatFile& file, const Matrix& queries, const SearchOptions& options);

// On the CPU, queries in parallel (OpenMP), by the file's metric. Throws Error when the query
// dimension is not the file's or k is 0. Queries of an angular file must already be normalised
// (load_points does it).
Neighbors search(const VlatFile& file, const Matrix& queries, const SearchOptions& options);

// k-recall@k of `found` against the first k columns of `truth` (ids as read_ids returns them, one
// row per query): the share of the true k nearest among the first k found, averaged
// over the queries. Throws Error on shapes that do not fit.
double recall_at(const Neighbors& found, const IdMatrix& truth, std::size_t k);

// What Neighbors::distances hold for a file of `metric`: "inner_product" for ip, else "squared_l2".
const char* distance_name(Metric metric);

// Writes an HDF5 file (.h5/.hdf5) with datasets `neighbors` (int64, queries x k) and `distances`
// (float32), and the text attribute `distance` (distance_name(metric)), under a temporary name
// renamed into place. Throws Error for another extension.
void write_search_results(const std::string& path, const Neighbors& found, Metric metric);

// Throws the Error write_search_results would for a path that does not name an HDF5 file.
void check_search_results_output(const std::string& path);

}  // namespace vlattice
