#include "maintenance.hpp"

#include "numeric.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>

namespace vlattice {

namespace {

struct TwoMeans {
    bool ok = false;
    std::vector<float> left, right;
    double gain = 0.0;  // estimated drop of the anchor's squared error, scaled to all its members
};

std::size_t farthest_from(const Matrix& x, const std::vector<float>& from) {
    std::size_t best = 0;
    double best_distance = -1.0;
    for (std::size_t i = 0; i < x.rows; ++i) {
        const double dist = ordered_squared_distance(x.row(i), from.data(), x.cols);
        if (dist > best_distance) {
            best_distance = dist;
            best = i;
        }
    }
    return best;
}

// Below this many member coordinates in all, waking the threads costs more than the 2-means: on
// the 16-core GPU machine, the 10k x 128 run (22 splits of 256 x 128) spent 7-25 ms in maintenance
// with the 2-means in parallel, 6-11 ms on one thread.
constexpr std::size_t kParallelSplitWork = std::size_t{1} << 19;

// Deterministic 2-means: seeded with the member farthest from the mean and the member farthest
// from that one, then a few Lloyd steps.
TwoMeans two_means(const Matrix& x, double total_count) {
    constexpr int kSteps = 6;
    TwoMeans result;
    const std::size_t r = x.rows;
    const std::size_t d = x.cols;
    if (r < 2) {
        return result;
    }
    std::vector<double> sum(d, 0.0);
    for (std::size_t i = 0; i < r; ++i) {
        for (std::size_t k = 0; k < d; ++k) {
            sum[k] += x.row(i)[k];
        }
    }
    std::vector<float> mean(d);
    for (std::size_t k = 0; k < d; ++k) {
        mean[k] = static_cast<float>(sum[k] / static_cast<double>(r));
    }
    std::vector<float> centre[2];
    const std::size_t a = farthest_from(x, mean);
    centre[0].assign(x.row(a), x.row(a) + d);
    const std::size_t b = farthest_from(x, centre[0]);
    centre[1].assign(x.row(b), x.row(b) + d);
    if (centre[0] == centre[1]) {
        return result;  // every member is the same point
    }

    double before = 0.0;
    for (std::size_t i = 0; i < r; ++i) {
        before += ordered_squared_distance(x.row(i), mean.data(), d);
    }
    double after = 0.0;
    std::vector<int> side_of(r, -1);
    for (int step = 0; step <= kSteps; ++step) {
        std::vector<double> side_sum[2] = {std::vector<double>(d, 0.0), std::vector<double>(d, 0.0)};
        std::size_t size[2] = {0, 0};
        std::size_t moved = 0;
        after = 0.0;
        for (std::size_t i = 0; i < r; ++i) {
            const double dist[2] = {ordered_squared_distance(x.row(i), centre[0].data(), d),
                                    ordered_squared_distance(x.row(i), centre[1].data(), d)};
            const int side = dist[1] < dist[0] ? 1 : 0;
            moved += side != side_of[i] ? 1 : 0;
            side_of[i] = side;
            after += dist[side];
            ++size[side];
            for (std::size_t k = 0; k < d; ++k) {
                side_sum[side][k] += x.row(i)[k];
            }
        }
        // The same halves give the same centres: the remaining steps would change nothing.
        if (step == kSteps || moved == 0) {
            break;
        }
        for (int s = 0; s < 2; ++s) {
            for (std::size_t k = 0; k < d && size[s] > 0; ++k) {
                centre[s][k] = static_cast<float>(side_sum[s][k] / static_cast<double>(size[s]));
            }
        }
    }
    result.ok = true;
    result.left = centre[0];
    result.right = centre[1];
    result.gain = (before - after) * total_count / static_cast<double>(r);
    return result;
}

// Squared distance from each non-empty anchor to its nearest other non-empty anchor, and which.
void nearest_anchors(const Matrix& anchors, const std::vector<double>& count, const NearestSource& nearest_rows,
                     std::vector<double>& distance, std::vector<std::size_t>& nearest) {
    const std::size_t m = anchors.rows;
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
    // Usually every anchor is live, and the copy (m x d) is not needed.
    Matrix live_anchors;
    if (live.size() < m) {
        live_anchors = Matrix(live.size(), anchors.cols);
        for (std::size_t r = 0; r < live.size(); ++r) {
            std::copy(anchors.row(live[r]), anchors.row(live[r]) + anchors.cols, live_anchors.row(r));
        }
    }
    const NearestRows found = nearest_rows(live.size() < m ? live_anchors : anchors);
    for (std::size_t r = 0; r < live.size(); ++r) {
        distance[live[r]] = found.distance[r];
        nearest[live[r]] = live[found.index[r]];
    }
}

// Indices of `keys` sorted by key (descending if asked), ties by index.
std::vector<std::size_t> order_by(const std::vector<double>& keys, bool descending) {
    std::vector<std::size_t> order(keys.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        return descending ? keys[a] > keys[b] : keys[a] < keys[b];
    });
    return order;
}

class Maintenance {
public:
    Maintenance(Matrix& anchors, const AnchorStats& stats, const AnnealConfig& config, const MemberSource& members,
                const NearestSource& nearest_rows)
        : anchors_(anchors), config_(config), members_(members), touched_(anchors.rows, false) {
        const std::size_t m = anchors.rows;
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
        nearest_anchors(anchors_, count_, nearest_rows, nn_distance_, nearest_);
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
        for (std::size_t j : order_by(nn_distance_, false)) {
            const std::size_t k = nearest_[j];
            if (!(std::sqrt(nn_distance_[j]) < limit)) {
                break;
            }
            if (touched_[j] || touched_[k]) {
                continue;
            }
            const std::size_t keep = std::min(j, k);
            const std::size_t freed = std::max(j, k);
            const double w = count_[keep] / (count_[keep] + count_[freed]);
            for (std::size_t c = 0; c < anchors_.cols; ++c) {
                anchors_.row(keep)[c] = static_cast<float>(w * anchors_.row(keep)[c] + (1 - w) * anchors_.row(freed)[c]);
            }
            // Until re-seeded, the freed slot duplicates the merged anchor: ties go to the lower index,
            // so it attracts no points and the merge is not undone by the next assign.
            std::copy(anchors_.row(keep), anchors_.row(keep) + anchors_.cols, anchors_.row(freed));
            count_[keep] += count_[freed];
            count_[freed] = 0;
            sse_[freed] = 0;
            free_.insert(freed);
            mark(keep);
            mark(freed);
            ++result_.merged;
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
        const std::vector<std::size_t> victims = order_by(removal_cost, false);
        std::size_t next_victim = 0;
        std::vector<std::size_t> flagged;
        for (std::size_t j : order_by(sse_, true)) {
            if (!touched_[j] && (count_[j] > count_limit || (variance_limit > 0 && variance_[j] > variance_limit))) {
                flagged.push_back(j);
            }
        }
        const std::vector<TwoMeans> splits = split_many(flagged);
        for (std::size_t t = 0; t < flagged.size(); ++t) {
            const std::size_t j = flagged[t];
            if (touched_[j]) {
                continue;
            }
            // A split gains at most the anchor's whole squared error: when even the cheapest removal
            // costs more, no flagged anchor from here on (their errors are smaller) can pay for a slot.
            if (free_.empty()) {
                while (next_victim < victims.size() &&
                       (touched_[victims[next_victim]] || victims[next_victim] == j)) {
                    ++next_victim;
                }
                if (next_victim == victims.size() || !(removal_cost[victims[next_victim]] < sse_[j])) {
                    break;
                }
            }
            const TwoMeans& split = splits[t];
            if (!split.ok) {
                continue;
            }
            std::size_t slot = anchors_.rows;
            if (!free_.empty()) {
                slot = *free_.begin();
                free_.erase(free_.begin());
            } else {
                if (!(removal_cost[victims[next_victim]] < split.gain)) {
                    continue;
                }
                slot = victims[next_victim++];
            }
            apply(j, slot, split);
            ++result_.split;
        }
    }

    void reseed() {
        const std::vector<std::size_t> order = order_by(sse_, true);
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
            const std::vector<TwoMeans> splits = split_many(batch);
            for (std::size_t t = 0; t < batch.size() && !free_.empty(); ++t) {
                if (!splits[t].ok) {
                    continue;
                }
                const std::size_t slot = *free_.begin();
                free_.erase(free_.begin());
                apply(batch[t], slot, splits[t]);
                ++result_.reseeded;
            }
        }
    }

    MaintenanceResult finish() {
        result_.changed_rows.assign(changed_.begin(), changed_.end());
        return result_;
    }

private:
    // The 2-means of several anchors: their members are gathered all at once (the source may be a
    // GPU), then split in parallel, each by one thread, so the results do not depend on the thread
    // count. Within one pass the members and counts of the listed anchors do not change.
    std::vector<TwoMeans> split_many(const std::vector<std::size_t>& anchors) const {
        const std::vector<Matrix> members = members_(std::vector<std::uint32_t>(anchors.begin(), anchors.end()));
        std::size_t work = 0;
        for (const Matrix& rows : members) {
            work += rows.data.size();
        }
        std::vector<TwoMeans> splits(anchors.size());
#pragma omp parallel for schedule(dynamic, 1) if (work >= kParallelSplitWork)
        for (std::size_t t = 0; t < anchors.size(); ++t) {
            splits[t] = two_means(members[t], count_[anchors[t]]);
        }
        return splits;
    }

    void mark(std::size_t j) {
        touched_[j] = true;
        changed_.insert(static_cast<std::uint32_t>(j));
    }

    void apply(std::size_t j, std::size_t slot, const TwoMeans& split) {
        std::copy(split.left.begin(), split.left.end(), anchors_.row(j));
        std::copy(split.right.begin(), split.right.end(), anchors_.row(slot));
        mark(j);
        mark(slot);
    }

    Matrix& anchors_;
    const AnnealConfig& config_;
    const MemberSource& members_;
    std::vector<double> count_, sse_, variance_, nn_distance_;
    std::vector<std::size_t> nearest_;
    std::vector<bool> touched_;
    std::set<std::size_t> free_;
    std::set<std::uint32_t> changed_;
    MaintenanceResult result_;
};

}  // namespace

MaintenanceResult maintain(Matrix& anchors, const AnchorStats& stats, const AnnealConfig& config,
                           const MemberSource& members, const NearestSource& nearest_rows) {
    Maintenance maintenance(anchors, stats, config, members, nearest_rows);
    maintenance.merge();
    maintenance.split_outliers();
    maintenance.reseed();
    return maintenance.finish();
}

}  // namespace vlattice
