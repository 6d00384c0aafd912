// k-NN over product codes on the CPU by asymmetric distance (include/vlattice/search.hpp): per query
// one set of code-byte tables, then each probed list is a run of table lookups over its members'
// codes, kScanBlock vectors at a time.
#include "codes/product_search.hpp"

#include "codes/product_scan.hpp"
#include "codes/rotation.hpp"
#include "search/anchor_probe.hpp"
#include "search/search_scores.hpp"

#include <algorithm>
#include <limits>
#include <vector>

namespace vlattice {

namespace {

// Blocks of codes summed at once when every anchor is visited: a few hundred KiB of sums per thread
// whatever the file's size.
constexpr std::size_t kExhaustiveBlocks = 4096;

// Queries probed before any is scanned, their probes held at once.
constexpr std::size_t kChunkQueries = 8192;

// The `keep` smallest (score, id) pairs offered so far. Most candidates of a long scan lose to the
// keep-th best seen, so a comparison turns them away; the rest gather until a selection trims them.
class Best {
public:
    explicit Best(std::size_t keep) : keep_(keep), limit_(keep + std::max<std::size_t>(keep, 1024)) {}

    void clear() {
        items_.clear();
        bound_ = std::numeric_limits<float>::infinity();
    }
    void offer(float score, std::uint32_t id) {
        // A tie with the bound may still win on its id.
        if (score > bound_) {
            return;
        }
        items_.emplace_back(score, id);
        if (items_.size() >= limit_) {
            const auto last = items_.begin() + static_cast<std::ptrdiff_t>(keep_ - 1);
            std::nth_element(items_.begin(), last, items_.end());
            items_.resize(keep_);
            bound_ = items_.back().first;
        }
    }
    // Sorted.
    std::vector<Scored>& result() {
        keep_smallest(items_, keep_);
        return items_;
    }

private:
    std::size_t keep_;
    std::size_t limit_;
    std::vector<Scored> items_;
    float bound_ = std::numeric_limits<float>::infinity();
};

}  // namespace

Neighbors search_product(const VlatFile& file, const Matrix& queries, const SearchOptions& options) {
    const Matrix& anchors = file.anchors;
    const ProductCodebook& book = file.product.book;
    const std::size_t d = anchors.cols;
    const std::size_t m = anchors.rows;
    const std::size_t k = options.k;
    const std::size_t nprobe = options.nprobe == 0 ? m : std::min(options.nprobe, m);
    const std::size_t keep = options.rerank > 0 ? std::max(k, options.rerank) : k;
    const bool ip = file.metric == Metric::ip;
    // Each vector's e is computed once its list is first probed (add_extras).
    ProductScan scan = product_scan(file, false);
    const ScanUnits& units = scan.units;
    const std::size_t block_bytes = units.count * kScanBlock * units.width;
    const ProductTables tables(book, scan.centroids_t);
    const AnchorProbe anchor_probe(anchors, file.metric);
    const BlockSums sums_of = fastest_block_sums();
    const bool exhaustive = nprobe == m;
    const std::size_t all_blocks = (scan.lists.members.size() + kScanBlock - 1) / kScanBlock;
    // Every query rotated at once, blocked, in the order rotate_rows fixes, as the GPU's search repeats it.
    const Matrix rotated = rotate_rows(book.rotation, queries);

    Neighbors out;
    out.queries = queries.rows;
    out.k = k;
    out.ids.assign(queries.rows * k, -1);
    out.distances.assign(queries.rows * k, std::numeric_limits<float>::infinity());
    std::uint64_t visited = 0;
    std::vector<std::vector<Scored>> chunk_probes;
    for (std::size_t chunk = 0; chunk < queries.rows; chunk += kChunkQueries) {
        const std::size_t chunk_end = std::min(queries.rows, chunk + kChunkQueries);
        anchor_probe.probe(queries, chunk, chunk_end - chunk, nprobe, chunk_probes);
        std::vector<std::uint8_t> probed(m, exhaustive ? 1 : 0);
        for (const std::vector<Scored>& probes : chunk_probes) {
            for (const Scored& anchor : probes) {
                probed[anchor.second] = 1;
            }
        }
        add_extras(file, scan, probed);
#pragma omp parallel reduction(+ : visited)
        {
            const std::size_t batch = tables.batch_queries();
            const std::size_t per_query = units.count * units.values;
            std::vector<float> lookups(batch * per_query);
            std::vector<float> sums;
            std::vector<float> probe_of(exhaustive ? m : 0);
            std::vector<float> row(d);
            Best best(keep);
            const auto search_one = [&](std::size_t q, const float* lookup) {
                const float* query = queries.row(q);
                const std::vector<Scored>& probes = chunk_probes[q - chunk];
                best.clear();
                const auto offer = [&](float probe, std::size_t p, float sum) {
                    best.offer(ip ? adc_ip_score(probe, sum) : adc_l2_score(probe, scan.extra[p], sum),
                               scan.lists.members[p]);
                };
                if (exhaustive) {
                    // Every anchor visited: the vectors in their stored order, a run of blocks at a
                    // time, so that a block two anchors' lists share is summed once, not once for each.
                    for (const auto& [probe, a] : probes) {
                        probe_of[a] = probe;
                    }
                    visited += scan.lists.members.size();
                    std::size_t a = 0;
                    for (std::size_t run = 0; run < all_blocks; run += kExhaustiveBlocks) {
                        const std::size_t blocks = std::min(kExhaustiveBlocks, all_blocks - run);
                        sums.resize(blocks * kScanBlock);
                        sums_of(scan.codes.data() + run * block_bytes, blocks, units, lookup, sums.data());
                        const std::size_t base = run * kScanBlock;
                        const std::size_t end = std::min(scan.lists.members.size(), base + blocks * kScanBlock);
                        for (std::size_t p = base; p < end; ++p) {
                            while (scan.lists.start[a + 1] <= p) {
                                ++a;
                            }
                            offer(probe_of[a], p, sums[p - base]);
                        }
                    }
                } else {
                    for (const auto& [probe, a] : probes) {
                        const std::size_t first = scan.lists.start[a];
                        const std::size_t end = scan.lists.start[a + 1];
                        if (first == end) {
                            continue;
                        }
                        visited += end - first;
                        const std::size_t first_block = first / kScanBlock;
                        const std::size_t blocks = (end + kScanBlock - 1) / kScanBlock - first_block;
                        sums.resize(blocks * kScanBlock);
                        sums_of(scan.codes.data() + first_block * block_bytes, blocks, units, lookup,
                                sums.data());
                        const std::size_t base = first_block * kScanBlock;
                        for (std::size_t p = first; p < end; ++p) {
                            offer(probe, p, sums[p - base]);
                        }
                    }
                }
                std::vector<Scored>& found = best.result();
                if (options.rerank > 0) {
                    for (auto& [score, id] : found) {
                        decode_product_row(anchors, file.product, file.assignments[id], id, row.data());
                        score = exact_score(query, row.data(), d, file.metric);
                    }
                    keep_smallest(found, k);
                }
                for (std::size_t r = 0; r < found.size(); ++r) {
                    out.ids[q * k + r] = found[r].second;
                    out.distances[q * k + r] = found[r].first;
                }
            };
            const auto batches = static_cast<std::ptrdiff_t>((chunk_end - chunk + batch - 1) / batch);
#pragma omp for schedule(dynamic, 1)
            for (std::ptrdiff_t bb = 0; bb < batches; ++bb) {
                const std::size_t first = chunk + static_cast<std::size_t>(bb) * batch;
                const std::size_t in_batch = std::min(batch, chunk_end - first);
                const float* from[kMostBatchQueries];
                float* into[kMostBatchQueries];
                for (std::size_t i = 0; i < in_batch; ++i) {
                    from[i] = rotated.row(first + i);
                    into[i] = lookups.data() + i * per_query;
                }
                tables.unit_tables(from, in_batch, into);
                for (std::size_t i = 0; i < in_batch; ++i) {
                    search_one(first + i, into[i]);
                }
            }
        }
    }
    out.visited = visited;
    scores_to_distances(out, file.metric);
    return out;
}

}  // namespace vlattice
