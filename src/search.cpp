// IVF-style k-NN over a compressed set on the CPU (include/vlattice/search.hpp).
#include "vlattice/search.hpp"

#include "member_lists.hpp"
#include "numeric.hpp"
#include "vlattice/codec.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

namespace vlattice {

namespace {

using Scored = std::pair<float, std::uint32_t>;  // (distance, id): the order is the contract's

// The `keep` smallest, sorted.
void keep_smallest(std::vector<Scored>& scored, std::size_t keep) {
    keep = std::min(keep, scored.size());
    std::partial_sort(scored.begin(), scored.begin() + static_cast<std::ptrdiff_t>(keep), scored.end());
    scored.resize(keep);
}

float distance(const float* a, const float* b, std::size_t d) {
    return static_cast<float>(ordered_squared_distance(a, b, d));
}

}  // namespace

void check_search(const VlatFile& file, const Matrix& queries, const SearchOptions& options) {
    check_compressed_set(file);
    if (queries.cols != file.anchors.cols) {
        throw Error("the queries have " + std::to_string(queries.cols) + " dimensions, the compressed set " +
                    std::to_string(file.anchors.cols));
    }
    if (options.k == 0) {
        throw Error("k must be at least 1");
    }
}

Neighbors search(const VlatFile& file, const Matrix& queries, const SearchOptions& options) {
    check_search(file, queries, options);
    const Matrix& anchors = file.anchors;
    const std::size_t d = anchors.cols;
    const std::size_t m = anchors.rows;
    const std::size_t nprobe = options.nprobe == 0 ? m : std::min(options.nprobe, m);
    const MemberLists lists = member_lists(file.assignments, m);

    Neighbors out;
    out.queries = queries.rows;
    out.k = options.k;
    out.ids.assign(queries.rows * options.k, -1);
    out.distances.assign(queries.rows * options.k, std::numeric_limits<float>::infinity());
    std::uint64_t visited = 0;
    const std::ptrdiff_t count = static_cast<std::ptrdiff_t>(queries.rows);
#pragma omp parallel reduction(+ : visited)
    {
        std::vector<Scored> probes(m);
        std::vector<Scored> candidates;
        std::vector<float> reconstruction(d);
#pragma omp for schedule(dynamic, 4)
        for (std::ptrdiff_t qq = 0; qq < count; ++qq) {
            const auto q = static_cast<std::size_t>(qq);
            const float* query = queries.row(q);
            probes.resize(m);
            for (std::size_t j = 0; j < m; ++j) {
                probes[j] = {distance(query, anchors.row(j), d), static_cast<std::uint32_t>(j)};
            }
            keep_smallest(probes, nprobe);
            candidates.clear();
            for (const auto& [anchor_distance, j] : probes) {
                for (std::size_t p = lists.start[j]; p < lists.start[j + 1]; ++p) {
                    const std::uint32_t i = lists.members[p];
                    float dist = anchor_distance;
                    if (!file.residuals.empty()) {
                        decode_row(anchors, file.residuals, j, i, reconstruction.data());
                        dist = distance(query, reconstruction.data(), d);
                    }
                    candidates.emplace_back(dist, i);
                }
            }
            visited += candidates.size();
            keep_smallest(candidates, options.k);
            for (std::size_t r = 0; r < candidates.size(); ++r) {
                out.ids[q * options.k + r] = candidates[r].second;
                out.distances[q * options.k + r] = candidates[r].first;
            }
        }
    }
    out.visited = visited;
    return out;
}

double recall_at(const Neighbors& found, const Matrix& truth, std::size_t k) {
    if (k == 0 || k > found.k || truth.rows != found.queries || truth.cols < k || found.queries == 0) {
        throw Error("recall@" + std::to_string(k) + " needs 1 <= k <= " + std::to_string(found.k) +
                    " neighbours found per query and a ground truth of " + std::to_string(found.queries) +
                    " rows of at least " + std::to_string(k) + " ids; it has " + std::to_string(truth.rows) + " x " +
                    std::to_string(truth.cols));
    }
    std::size_t hits = 0;
    for (std::size_t q = 0; q < found.queries; ++q) {
        std::vector<float> expected(truth.row(q), truth.row(q) + k);
        std::sort(expected.begin(), expected.end());
        for (std::size_t r = 0; r < k; ++r) {
            const std::int64_t id = found.ids[q * found.k + r];
            hits += id >= 0 && std::binary_search(expected.begin(), expected.end(), static_cast<float>(id)) ? 1 : 0;
        }
    }
    return static_cast<double>(hits) / static_cast<double>(found.queries * k);
}

}  // namespace vlattice
