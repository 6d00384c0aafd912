// IVF-style k-NN over a compressed set on the CPU (include/vlattice/search.hpp).
#include "vlattice/search.hpp"

#include "codes/product_search.hpp"
#include "fit/member_lists.hpp"
#include "search/anchor_probe.hpp"
#include "search/search_scores.hpp"
#include "vlattice/codec.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>

namespace vlattice {

const char* distance_name(Metric metric) {
    return metric == Metric::ip ? "inner_product" : "squared_l2";
}

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

namespace {

// Queries are searched in blocks; each list a block probes is decoded once into a cache that all of
// the block's queries read, since decoding costs several times what the distance does. A block
// grows until its lists would take more than SearchOptions::cache_floats or it reaches the end of
// the chunk of kChunkQueries queries whose probes were computed together.
constexpr std::size_t kChunkQueries = 1024;

struct Block {
    std::size_t count = 0;  // queries, from the one plan_block started at
    std::vector<std::uint32_t> lists;        // the anchors the block probes, in increasing order
    std::vector<std::size_t> cache_row;      // per anchor: its first row in the cache (lists only)
    std::size_t cache_rows = 0;
};

// Extends the block from query `first` to at most `end` while its decoded lists fit the cache;
// probes[q - chunk] are query q's.
Block plan_block(std::size_t first, std::size_t end, std::size_t chunk, const std::vector<std::vector<Scored>>& probes,
                 const MemberLists& lists, std::size_t d, std::size_t m, std::size_t cache_floats) {
    Block block;
    block.cache_row.assign(m, SIZE_MAX);
    for (std::size_t q = first; q < end; ++q) {
        std::size_t added = 0;
        for (const auto& probe : probes[q - chunk]) {
            const std::uint32_t j = probe.second;
            if (block.cache_row[j] == SIZE_MAX) {
                added += lists.start[j + 1] - lists.start[j];
            }
        }
        if (block.count > 0 && (block.cache_rows + added) * d > cache_floats) {
            break;
        }
        for (const auto& probe : probes[q - chunk]) {
            const std::uint32_t j = probe.second;
            if (block.cache_row[j] == SIZE_MAX) {
                block.cache_row[j] = block.cache_rows;
                block.cache_rows += lists.start[j + 1] - lists.start[j];
                block.lists.push_back(j);
            }
        }
        ++block.count;
    }
    return block;
}

}  // namespace

Neighbors search(const VlatFile& file, const Matrix& queries, const SearchOptions& options) {
    check_search(file, queries, options);
    if (file.codec == ResidualCodec::product) {
        return search_product(file, queries, options);
    }
    const Matrix& anchors = file.anchors;
    const std::size_t d = anchors.cols;
    const std::size_t m = anchors.rows;
    const std::size_t nprobe = options.nprobe == 0 ? m : std::min(options.nprobe, m);
    const bool coded = !file.residuals.empty();
    const MemberLists lists = member_lists(file.assignments, m);

    Neighbors out;
    out.queries = queries.rows;
    out.k = options.k;
    out.ids.assign(queries.rows * options.k, -1);
    out.distances.assign(queries.rows * options.k, std::numeric_limits<float>::infinity());
    std::uint64_t visited = 0;
    std::vector<std::vector<Scored>> probes;
    const AnchorProbe probe(anchors, file.metric);
    Matrix cache;
    for (std::size_t chunk = 0; chunk < queries.rows; chunk += kChunkQueries) {
        const std::size_t end = std::min(queries.rows, chunk + kChunkQueries);
        probe.probe(queries, chunk, end - chunk, nprobe, probes);
        for (std::size_t first = chunk; first < end;) {
            const Block block = plan_block(first, end, chunk, probes, lists, d, m, options.cache_floats);
            if (coded) {
                cache.rows = block.cache_rows;
                cache.cols = d;
                cache.data.resize(block.cache_rows * d);
                const auto list_count = static_cast<std::ptrdiff_t>(block.lists.size());
#pragma omp parallel for schedule(dynamic, 8)
                for (std::ptrdiff_t l = 0; l < list_count; ++l) {
                    const std::uint32_t j = block.lists[static_cast<std::size_t>(l)];
                    for (std::size_t p = lists.start[j]; p < lists.start[j + 1]; ++p) {
                        decode_row(anchors, file.residuals, j, lists.members[p],
                                   cache.row(block.cache_row[j] + p - lists.start[j]));
                    }
                }
            }
            const auto count = static_cast<std::ptrdiff_t>(block.count);
#pragma omp parallel reduction(+ : visited)
            {
                std::vector<Scored> candidates;
#pragma omp for schedule(dynamic, 4)
                for (std::ptrdiff_t qq = 0; qq < count; ++qq) {
                    const std::size_t q = first + static_cast<std::size_t>(qq);
                    const float* query = queries.row(q);
                    candidates.clear();
                    for (const auto& [anchor_score, j] : probes[q - chunk]) {
                        visited += lists.start[j + 1] - lists.start[j];
                        // Without codes a list's members all score as their anchor, and the probes
                        // come best first: once k are in hand, a worse list adds nothing.
                        if (!coded && candidates.size() >= options.k && anchor_score > candidates.back().first) {
                            continue;
                        }
                        const float* rows = coded ? cache.row(block.cache_row[j]) : nullptr;
                        for (std::size_t p = lists.start[j]; p < lists.start[j + 1]; ++p) {
                            const float value = coded ? exact_score(query, rows + (p - lists.start[j]) * d, d,
                                                                    file.metric)
                                                      : anchor_score;
                            candidates.emplace_back(value, lists.members[p]);
                        }
                    }
                    keep_smallest(candidates, options.k);
                    for (std::size_t r = 0; r < candidates.size(); ++r) {
                        out.ids[q * options.k + r] = candidates[r].second;
                        out.distances[q * options.k + r] = candidates[r].first;
                    }
                }
            }
            first += block.count;
        }
    }
    out.visited = visited;
    scores_to_distances(out, file.metric);
    return out;
}

double recall_at(const Neighbors& found, const IdMatrix& truth, std::size_t k) {
    if (k == 0 || k > found.k || truth.rows != found.queries || truth.cols < k || found.queries == 0) {
        throw Error("recall@" + std::to_string(k) + " needs 1 <= k <= " + std::to_string(found.k) +
                    " neighbours found per query and a ground truth of " + std::to_string(found.queries) +
                    " rows of at least " + std::to_string(k) + " ids; it has " + std::to_string(truth.rows) + " x " +
                    std::to_string(truth.cols));
    }
    std::size_t hits = 0;
    for (std::size_t q = 0; q < found.queries; ++q) {
        std::vector<std::int64_t> expected(truth.row(q), truth.row(q) + k);
        std::sort(expected.begin(), expected.end());
        for (std::size_t r = 0; r < k; ++r) {
            const std::int64_t id = found.ids[q * found.k + r];
            hits += id >= 0 && std::binary_search(expected.begin(), expected.end(), id) ? 1 : 0;
        }
    }
    return static_cast<double>(hits) / static_cast<double>(found.queries * k);
}

}  // namespace vlattice
