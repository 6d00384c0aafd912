#include "fit/maintenance.hpp"

#include "numeric.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <utility>

namespace vlattice {

namespace {

// Squared distance from each non-empty anchor to its nearest other non-empty anchor, and which.
void nearest_anchors(const std::vector<double>& count, const NearestSource& nearest_of, std::vector<double>& distance,
                     std::vector<std::size_t>& nearest) {
    const std::size_t m = count.size();
    distance.assign(m, std::numeric_limits<double>::infinity());
    nearest.assign(m, m);
    std::vector<std::uint32_t> live;
    for (std::size_t j = 0; j < m; ++j) {
        if (count[j] > 0) {
            live.push_back(static_cast<std::uint32_t>(j));
        }
    }
    if (live.size() < 2) {
        return;
    }
    const NearestRows found = nearest_of(live);
    for (std::size_t r = 0; r < live.size(); ++r) {
        distance[live[r]] = found.distance[r];
        nearest[live[r]] = live[found.index[r]];
    }
}

// The indices j with wanted(j), sorted by keys[j] (descending if asked), ties by index. Filtering
// before sorting matters at m = 4,096, where sorting every anchor took ~0.25 ms per call on the
// GPU machine, and usually few anchors are wanted.
template <class Wanted>
std::vector<std::size_t> order_by(const std::vector<double>& keys, bool descending, Wanted wanted) {
    std::vector<std::size_t> order;
    for (std::size_t j = 0; j < keys.size(); ++j) {
        if (wanted(j)) {
            order.push_back(j);
        }
    }
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        return descending ? keys[a] > keys[b] : keys[a] < keys[b];
    });
    return order;
}

// The indices in increasing keys[j], ties by index, handed out one at a time: a pass takes only a
// few of them, and sorting all of them first cost ~0.07 ms at 1,024 anchors.
class CheapestFirst {
public:
    explicit CheapestFirst(const std::vector<double>& keys) {
        heap_.reserve(keys.size());
        for (std::size_t j = 0; j < keys.size(); ++j) {
            heap_.emplace_back(keys[j], j);
        }
        std::make_heap(heap_.begin(), heap_.end(), std::greater<>());
    }
    bool empty() const { return heap_.empty(); }
    std::size_t top() const { return heap_.front().second; }
    void pop() {
        std::pop_heap(heap_.begin(), heap_.end(), std::greater<>());
        heap_.pop_back();
    }

private:
    std::vector<std::pair<double, std::size_t>> heap_;
};

class Maintenance {
public:
    Maintenance(const AnchorStats& stats, std::size_t d, const AnnealConfig& config, const RowSource& rows,
                const SplitSource& splits, const NearestSource& nearest)
        : d_(d), config_(config), rows_(rows), splits_(splits), touched_(stats.count.size(), false) {
        const std::size_t m = stats.count.size();
        count_.resize(m);
        sse_.resize(m);
        variance_ = stats.variance;
        for (std::size_t j = 0; j < m; ++j) {
            count_[j] = stats.count[j];
            sse_[j] = stats.count[j] * stats.variance[j];
            if (stats.count[j] == 0) {
                free_.insert(j);
            }
        }
        nearest_anchors(count_, nearest, nn_distance_, nearest_);
    }

    void merge() {
        double weighted = 0.0;
        double total = 0.0;
        for (std::size_t j = 0; j < count_.size(); ++j) {
            if (count_[j] > 0 && std::isfinite(nn_distance_[j])) {
                weighted += count_[j] * std::sqrt(nn_distance_[j]);
                total += count_[j];
            }
        }
        if (total == 0.0) {
            return;
        }
        const double limit = config_.merge_factor * weighted / total;
        const auto close = [&](std::size_t j) { return std::sqrt(nn_distance_[j]) < limit; };
        // The pairs first: no merge touches an anchor of another, so their rows come in one fetch.
        struct Pair {
            std::size_t keep;
            std::size_t freed;
            double w;
        };
        std::vector<Pair> pairs;
        std::vector<std::uint32_t> wanted;
        for (std::size_t j : order_by(nn_distance_, false, close)) {
            const std::size_t k = nearest_[j];
            if (touched_[j] || touched_[k]) {
                continue;
            }
            const std::size_t keep = std::min(j, k);
            const std::size_t freed = std::max(j, k);
            pairs.push_back({keep, freed, count_[keep] / (count_[keep] + count_[freed])});
            wanted.push_back(static_cast<std::uint32_t>(keep));
            wanted.push_back(static_cast<std::uint32_t>(freed));
            count_[keep] += count_[freed];
            count_[freed] = 0;
            sse_[freed] = 0;
            free_.insert(freed);
            touched_[keep] = true;
            touched_[freed] = true;
            ++result_.merged;
        }
        if (pairs.empty()) {
            return;
        }
        const Matrix fetched = rows_(wanted);
        for (std::size_t t = 0; t < pairs.size(); ++t) {
            const float* keep = fetched.row(2 * t);
            const float* freed = fetched.row(2 * t + 1);
            std::vector<float> merged(d_);
            for (std::size_t c = 0; c < d_; ++c) {
                merged[c] = static_cast<float>(pairs[t].w * keep[c] + (1 - pairs[t].w) * freed[c]);
            }
            // Until re-seeded, the freed slot duplicates the merged anchor: ties go to the lower index,
            // so it attracts no points and the merge is not undone by the next assign.
            rewritten_[pairs[t].freed] = merged;
            rewritten_[pairs[t].keep] = std::move(merged);
        }
    }

    void split_outliers() {
        double count_sum = 0.0, variance_sum = 0.0, live = 0.0;
        for (std::size_t j = 0; j < count_.size(); ++j) {
            if (count_[j] > 0) {
                count_sum += count_[j];
                variance_sum += variance_[j];
                live += 1;
            }
        }
        if (live == 0) {
            return;
        }
        const double count_limit = config_.split_factor * count_sum / live;
        const double variance_limit = config_.split_factor * variance_sum / live;
        std::vector<double> removal_cost(count_.size(), std::numeric_limits<double>::infinity());
        for (std::size_t j = 0; j < count_.size(); ++j) {
            if (count_[j] > 0 && std::isfinite(nn_distance_[j])) {
                removal_cost[j] = count_[j] * nn_distance_[j];  // its members move to the nearest anchor
            }
        }
        const std::vector<std::size_t> flagged = order_by(sse_, true, [&](std::size_t j) {
            return !touched_[j] && (count_[j] > count_limit || (variance_limit > 0 && variance_[j] > variance_limit));
        });
        std::vector<MemberSplit> splits = split_many(flagged);
        CheapestFirst victims(removal_cost);
        for (std::size_t t = 0; t < flagged.size(); ++t) {
            const std::size_t j = flagged[t];
            if (touched_[j]) {
                continue;
            }
            // A split gains at most the anchor's whole squared error: when even the cheapest removal
            // costs more, no flagged anchor from here on (their errors are smaller) can pay for a slot.
            if (free_.empty()) {
                while (!victims.empty() && (touched_[victims.top()] || victims.top() == j)) {
                    victims.pop();
                }
                if (victims.empty() || !(removal_cost[victims.top()] < sse_[j])) {
                    break;
                }
            }
            MemberSplit& split = splits[t];
            if (!split.ok) {
                continue;
            }
            std::size_t slot = count_.size();
            if (!free_.empty()) {
                slot = *free_.begin();
                free_.erase(free_.begin());
            } else {
                if (!(removal_cost[victims.top()] < gain_of(j, split))) {
                    continue;
                }
                slot = victims.top();
                victims.pop();
            }
            apply(j, slot, std::move(split));
            ++result_.split;
        }
    }

    void reseed() {
        if (free_.empty()) {
            return;
        }
        const std::vector<std::size_t> order = order_by(sse_, true, [&](std::size_t j) { return count_[j] > 0; });
        std::size_t next = 0;
        // In batches of as many candidates as there are free slots: a candidate whose members are
        // all one point cannot be split, and the next one takes its turn.
        while (!free_.empty() && next < order.size()) {
            std::vector<std::size_t> batch;
            while (batch.size() < free_.size() && next < order.size()) {
                const std::size_t j = order[next++];
                if (!touched_[j] && count_[j] > 0) {
                    batch.push_back(j);
                }
            }
            std::vector<MemberSplit> splits = split_many(batch);
            for (std::size_t t = 0; t < batch.size() && !free_.empty(); ++t) {
                if (!splits[t].ok) {
                    continue;
                }
                const std::size_t slot = *free_.begin();
                free_.erase(free_.begin());
                apply(batch[t], slot, std::move(splits[t]));
                ++result_.reseeded;
            }
        }
    }

    MaintenanceResult finish() {
        result_.changed = Matrix(rewritten_.size(), d_);
        for (const auto& [j, row] : rewritten_) {
            std::copy(row.begin(), row.end(), result_.changed.row(result_.changed_rows.size()));
            result_.changed_rows.push_back(static_cast<std::uint32_t>(j));
        }
        return result_;
    }

private:
    // The 2-means of several anchors at once (the source may be a GPU). Within one pass the members
    // and counts of the listed anchors do not change.
    std::vector<MemberSplit> split_many(const std::vector<std::size_t>& anchors) const {
        return splits_(std::vector<std::uint32_t>(anchors.begin(), anchors.end()));
    }

    // The drop of anchor j's squared error that `split` promises, scaled from its sample to all its members.
    double gain_of(std::size_t j, const MemberSplit& split) const {
        return (split.before - split.after) * count_[j] / static_cast<double>(split.rows);
    }

    // The split's centres move into the rows that finish() hands back.
    void apply(std::size_t j, std::size_t slot, MemberSplit&& split) {
        rewritten_[j] = std::move(split.left);
        rewritten_[slot] = std::move(split.right);
        touched_[j] = true;
        touched_[slot] = true;
    }

    std::size_t d_;
    const AnnealConfig& config_;
    const RowSource& rows_;
    const SplitSource& splits_;
    std::vector<double> count_, sse_, variance_, nn_distance_;
    std::vector<std::size_t> nearest_;
    std::vector<bool> touched_;
    std::set<std::size_t> free_;
    std::map<std::size_t, std::vector<float>> rewritten_;  // the new rows of the anchors changed, by id
    MaintenanceResult result_;
};

}  // namespace

MaintenanceResult maintain(const AnchorStats& stats, std::size_t d, const AnnealConfig& config, const RowSource& rows,
                           const SplitSource& splits, const NearestSource& nearest) {
    Maintenance maintenance(stats, d, config, rows, splits, nearest);
    maintenance.merge();
    maintenance.split_outliers();
    maintenance.reseed();
    return maintenance.finish();
}

}  // namespace vlattice
