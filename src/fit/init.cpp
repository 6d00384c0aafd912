#include "fit/init.hpp"

#include "parallel/row_share.hpp"

#include "numeric.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <unordered_map>

namespace vlattice {

namespace {

// A loop of a round runs on several threads only from this many point coordinates on (8k points of
// 128 dimensions, about 0.1 ms of distances). Below it, waking the threads costs more than they
// save, and idle OpenMP threads keep spinning for a while after each parallel region, slowing the
// main thread wherever they share a core with it. Late rounds visit few points, so even a large
// sample runs only its first rounds in parallel. On 16 cores, 10k x 128 with m = 64 over all 10k
// points took 16 ms on one thread and 5 ms on 16.
constexpr std::size_t kParallelWork = std::size_t{1} << 20;

// ordered_squared_distance, which is nearly all of k-means++'s time, also compiled for AVX2: the
// lanes are added and multiplied as before, only twice as many at once, so every result is bit for
// bit the same; a 128-d distance takes about 40% less time.
VLATTICE_ALSO_FOR_X86_64_V3
double anchor_distance(const float* a, const float* b, std::size_t d) {
    return ordered_squared_distance(a, b, d);
}

// body(0), ..., body(n - 1), on the OpenMP threads when `parallel`. A serial loop does not enter an
// OpenMP region at all: even one whose if clause is false costs a futex call on leaving (libgomp's
// closing barrier), which hundreds of small rounds add up to a sizeable part of their time.
template <class Body>
void for_each_index(std::size_t n, bool parallel, const Body& body) {
    if (!parallel) {
        for (std::size_t i = 0; i < n; ++i) {
            body(i);
        }
        return;
    }
#pragma omp parallel for schedule(guided)
    for (std::size_t i = 0; i < n; ++i) {
        body(i);
    }
}

// The state of D^2 sampling over the sample. Each sample point knows its nearest chosen anchor and
// each anchor its members and their largest distance, so that a new anchor c only visits the
// members of anchors a with ||c - a|| < 2 * radius(a): a point x of a with ||c - a|| >= 2 ||x - a||
// is, by the triangle inequality, no closer to c than to a. Late in the run almost every anchor is
// skipped, which turns the O(s m d) of plain k-means++ into roughly O(m^2 d + s d log m).
class DSquaredSampler {
public:
    DSquaredSampler(const PointView& points, std::vector<std::size_t> sample, std::size_t m)
        : floats_(points.type() == StoredType::f32 && points.contiguous() && !points.mapped()
                      ? static_cast<const float*>(points.data())
                      : nullptr),
          cols_(points.cols), widened_(floats_ ? Matrix() : sampled_rows(points, sample)), sample_(std::move(sample)),
          anchors_(m, points.cols), nearest_(sample_.size(), 0.0),
          members_(m), radius_(m, 0.0), gap_(m, 0.0), moved_(sample_.size()),
          block_sum_((sample_.size() + kBlock - 1) / kBlock, 0.0), dirty_(block_sum_.size(), false) {}

    std::size_t size() const { return sample_.size(); }
    Matrix take_anchors() { return std::move(anchors_); }

    // Adds sample point `chosen` as anchor j and lowers every weight it lowers.
    void add(std::size_t j, std::size_t chosen) {
        std::memcpy(anchors_.row(j), point(chosen), anchors_.cols * sizeof(float));
        if (j == 0) {
            first_anchor();
        } else {
            claim_for(j);
        }
    }

    double total() const {
        double sum = 0.0;
        for (double b : block_sum_) {
            sum += b;
        }
        return sum;
    }

    // The sample point whose cumulative weight first exceeds `target` (0 <= target < total()).
    std::size_t pick(double target) const {
        double running = 0.0;
        std::size_t block = 0;
        while (block + 1 < block_sum_.size() && running + block_sum_[block] <= target) {
            running += block_sum_[block++];
        }
        const std::size_t begin = block * kBlock;
        const std::size_t end = std::min(begin + kBlock, nearest_.size());
        std::size_t last_positive = begin;
        for (std::size_t i = begin; i < end; ++i) {
            if (nearest_[i] > 0.0) {
                running += nearest_[i];
                last_positive = i;
                if (running > target) {
                    return i;
                }
            }
        }
        // The block sum and the walk round differently; the target fell between the two.
        return last_positive;
    }

private:
    static constexpr std::size_t kBlock = 256;
    // Long member lists are cut into spans of this many, so that the first rounds, when one or two
    // anchors own every point, still split among the threads.
    static constexpr std::size_t kSpan = 256;

    // Members [begin, end) of one anchor's list, lowered by one thread. Afterwards the `kept` that
    // stay lie at [begin, begin + kept) in their old order, the `moved` that go to the new anchor at
    // moved_[scratch], and the two maxima are their largest weights.
    struct Span {
        std::size_t anchor = 0;
        std::size_t begin = 0;
        std::size_t end = 0;
        std::size_t scratch = 0;
        std::size_t kept = 0;
        std::size_t moved = 0;
        double kept_max = 0.0;
        double moved_max = 0.0;
    };

    // Points of another stored type are widened once, the sample's rows alone, in sample order.
    static Matrix sampled_rows(const PointView& points, const std::vector<std::size_t>& sample) {
        return points.select(std::vector<std::uint32_t>(sample.begin(), sample.end()));
    }

    const float* point(std::size_t i) const { return floats_ ? floats_ + sample_[i] * cols_ : widened_.row(i); }

    void first_anchor() {
        const std::size_t s = sample_.size();
        const std::size_t d = anchors_.cols;
        const float* anchor = anchors_.row(0);
        for_each_index(s, s * d >= kParallelWork,
                       [&](std::size_t i) { nearest_[i] = anchor_distance(point(i), anchor, d); });
        members_[0].resize(s);
        std::iota(members_[0].begin(), members_[0].end(), std::uint32_t{0});
        radius_[0] = std::sqrt(*std::max_element(nearest_.begin(), nearest_.end()));
        for (std::size_t b = 0; b < block_sum_.size(); ++b) {
            refresh_block(b);
        }
    }

    // Each span is worked by one thread and lists its moves apart, so the outcome does not depend
    // on the schedule.
    void claim_for(std::size_t j) {
        measure_gaps(j);
        const std::size_t visits = plan_spans(j);
        for_each_index(spans_.size(), visits * anchors_.cols >= kParallelWork,
                       [&](std::size_t t) { lower(spans_[t], j); });
        regroup(j);
        for (std::size_t b = 0; b < block_sum_.size(); ++b) {
            if (dirty_[b]) {
                refresh_block(b);
                dirty_[b] = false;
            }
        }
    }

    // gap_[a] = ||anchor a - anchor j|| for every earlier anchor a.
    void measure_gaps(std::size_t j) {
        const std::size_t d = anchors_.cols;
        const float* anchor = anchors_.row(j);
        for_each_index(j, j * d >= kParallelWork,
                       [&](std::size_t a) { gap_[a] = std::sqrt(anchor_distance(anchors_.row(a), anchor, d)); });
    }

    // Spans over the members of every anchor that may lose some to anchor j; returns their count.
    std::size_t plan_spans(std::size_t j) {
        spans_.clear();
        std::size_t visits = 0;
        for (std::size_t a = 0; a < j; ++a) {
            if (!(gap_[a] < 2.0 * radius_[a])) {
                continue;
            }
            const std::size_t size = members_[a].size();
            for (std::size_t begin = 0; begin < size; begin += kSpan) {
                spans_.push_back({a, begin, std::min(begin + kSpan, size), visits + begin});
            }
            visits += size;
        }
        return visits;
    }

    // Lowers the weights of the span's members that are nearer to anchor j, and sorts the members
    // into those that stay and those that move to j.
    void lower(Span& span, std::size_t j) {
        const std::size_t d = anchors_.cols;
        const float* anchor = anchors_.row(j);
        const double gap = gap_[span.anchor];
        std::uint32_t* list = members_[span.anchor].data();
        std::uint32_t* moved = moved_.data() + span.scratch;
        // Counts and maxima in locals: the stores to nearest_ would otherwise force them to memory.
        std::size_t kept = 0;
        std::size_t moves = 0;
        double kept_max = 0.0;
        double moved_max = 0.0;
        for (std::size_t t = span.begin; t < span.end; ++t) {
            const std::uint32_t i = list[t];
            const double current = nearest_[i];
            if (gap < 2.0 * std::sqrt(current)) {
                const double dist = anchor_distance(point(i), anchor, d);
                if (dist < current) {
                    nearest_[i] = dist;
                    moved[moves++] = i;
                    moved_max = std::max(moved_max, dist);
                    continue;
                }
            }
            list[span.begin + kept++] = i;
            kept_max = std::max(kept_max, current);
        }
        span.kept = kept;
        span.moved = moves;
        span.kept_max = kept_max;
        span.moved_max = moved_max;
    }

    // Closes the gaps the moves left in each list, hands the moved members to anchor j in span
    // order, updates the radii and marks the blocks whose weights changed.
    void regroup(std::size_t j) {
        std::vector<std::uint32_t>& mine = members_[j];
        double mine_max = 0.0;
        for (std::size_t t = 0; t < spans_.size();) {
            const std::size_t a = spans_[t].anchor;
            std::vector<std::uint32_t>& list = members_[a];
            std::size_t kept = 0;
            double kept_max = 0.0;
            for (; t < spans_.size() && spans_[t].anchor == a; ++t) {
                const Span& span = spans_[t];
                std::memmove(list.data() + kept, list.data() + span.begin, span.kept * sizeof(std::uint32_t));
                kept += span.kept;
                kept_max = std::max(kept_max, span.kept_max);
                mine.insert(mine.end(), moved_.begin() + span.scratch, moved_.begin() + span.scratch + span.moved);
                mine_max = std::max(mine_max, span.moved_max);
            }
            list.resize(kept);
            radius_[a] = std::sqrt(kept_max);
        }
        radius_[j] = std::sqrt(mine_max);
        for (std::uint32_t i : mine) {
            dirty_[i / kBlock] = true;
        }
    }

    // Recomputed from scratch rather than adjusted by differences, so rounding never accumulates.
    void refresh_block(std::size_t b) {
        const std::size_t end = std::min((b + 1) * kBlock, nearest_.size());
        double sum = 0.0;
        for (std::size_t i = b * kBlock; i < end; ++i) {
            sum += nearest_[i];
        }
        block_sum_[b] = sum;
    }

    const float* floats_;  // the points where they are float32, else nullptr
    std::size_t cols_;
    Matrix widened_;  // else the sample's rows
    std::vector<std::size_t> sample_;
    Matrix anchors_;
    std::vector<double> nearest_;  // squared distance to the nearest chosen anchor
    std::vector<std::vector<std::uint32_t>> members_;
    std::vector<double> radius_;  // an upper bound of sqrt(nearest) over each anchor's members
    // Scratch of one round, kept between rounds so that a round allocates nothing.
    std::vector<double> gap_;
    std::vector<Span> spans_;
    std::vector<std::uint32_t> moved_;
    std::vector<double> block_sum_;
    std::vector<bool> dirty_;  // blocks whose weights changed this round
};

}  // namespace

std::vector<std::size_t> draw_sample(std::size_t n, std::size_t size, Random& random) {
    if (size >= n) {
        std::vector<std::size_t> index(n);
        std::iota(index.begin(), index.end(), std::size_t{0});
        return index;
    }
    // The swaps of a partial Fisher-Yates over 0..n-1, with only the displaced places kept: the same
    // draws as the whole array gives, in memory of the sample's size rather than n's (a sample of
    // 50,000 rows of a billion would otherwise take 8 GB of indices).
    std::unordered_map<std::size_t, std::size_t> displaced;
    displaced.reserve(2 * size);
    const auto at = [&](std::size_t place) {
        const auto found = displaced.find(place);
        return found == displaced.end() ? place : found->second;
    };
    std::vector<std::size_t> drawn(size);
    for (std::size_t i = 0; i < size; ++i) {
        const std::size_t j = i + random.below(n - i);
        drawn[i] = at(j);
        const std::size_t moved = at(i);  // place i is never drawn from again
        displaced.erase(i);
        displaced[j] = moved;
    }
    return drawn;
}

SeedingDraws draw_seeding(std::size_t n, std::size_t m, std::size_t sample_size, std::uint64_t seed) {
    Random random(seed);
    SeedingDraws draws;
    draws.sample = draw_sample(n, std::max(sample_size, m), random);
    draws.first = random.below(draws.sample.size());
    draws.uniforms.resize(m > 0 ? m - 1 : 0);
    for (double& u : draws.uniforms) {
        u = random.uniform();
    }
    return draws;
}

namespace {

// D^2 sampling of m anchors from the sampler's rows, `random` having drawn the sample.
Matrix d_squared_anchors(DSquaredSampler& sampler, std::size_t m, Random& random) {
    std::size_t chosen = random.below(sampler.size());
    for (std::size_t j = 0; j < m; ++j) {
        sampler.add(j, chosen);
        if (j + 1 == m) {
            break;
        }
        const double total = sampler.total();
        chosen = total > 0.0 ? sampler.pick(random.uniform() * total) : random.below(sampler.size());
    }
    return sampler.take_anchors();
}

}  // namespace

Matrix kmeans_plus_plus(const PointView& points, std::size_t m, std::size_t sample_size, std::uint64_t seed) {
    Random random(seed);
    DSquaredSampler sampler(points, draw_sample(points.rows, std::max(sample_size, m), random), m);
    return d_squared_anchors(sampler, m, random);
}

Matrix kmeans_plus_plus(const RowShare& share, const PointView& points, std::size_t m, std::size_t sample_size,
                        std::uint64_t seed) {
    if (share.ranks->size() == 1) {
        return kmeans_plus_plus(points, m, sample_size, seed);
    }
    Random random(seed);
    const std::vector<std::size_t> sample = draw_sample(share.total_rows, std::max(sample_size, m), random);
    // The sample's rows, in draw order, on every rank: the sampler then reads what one process reads.
    const Matrix rows = gather_rows(share, points, sample);
    std::vector<std::size_t> order(rows.rows);
    std::iota(order.begin(), order.end(), std::size_t{0});
    DSquaredSampler sampler(PointView(rows), std::move(order), m);
    return d_squared_anchors(sampler, m, random);
}

}  // namespace vlattice
