#include "init.hpp"

#include "numeric.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

namespace vlattice {

namespace {

// The state of D^2 sampling over the sample. Each sample point knows its nearest chosen anchor and
// each anchor its members and their largest distance, so that a new anchor c only visits the
// members of anchors a with ||c - a|| < 2 * radius(a): a point x of a with ||c - a|| >= 2 ||x - a||
// is, by the triangle inequality, no closer to c than to a. Late in the run almost every anchor is
// skipped, which turns the O(s m d) of plain k-means++ into roughly O(m^2 d + s d log m).
class DSquaredSampler {
public:
    DSquaredSampler(const Matrix& points, std::vector<std::size_t> sample, std::size_t m)
        : points_(points), sample_(std::move(sample)), anchors_(m, points.cols), nearest_(sample_.size(), 0.0),
          members_(m), radius_(m, 0.0),
          block_sum_((sample_.size() + kBlock - 1) / kBlock, 0.0),
          parallel_(sample_.size() * points.cols >= kParallelWork) {}

    std::size_t size() const { return sample_.size(); }
    std::size_t row_of(std::size_t i) const { return sample_[i]; }
    Matrix take_anchors() { return std::move(anchors_); }

    // Adds sample point `chosen` as anchor j and lowers every weight it lowers.
    void add(std::size_t j, std::size_t chosen) {
        std::memcpy(anchors_.row(j), points_.row(sample_[chosen]), anchors_.cols * sizeof(float));
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
    // Below this many sample coordinates a round's work is smaller than waking the threads: on 16
    // cores, 10k x 128 with m = 256 took 58 ms with threads, about 15 ms without.
    static constexpr std::size_t kParallelWork = std::size_t{1} << 22;

    void first_anchor() {
        const std::size_t s = sample_.size();
        const float* anchor = anchors_.row(0);
#pragma omp parallel for schedule(static) if (parallel_)
        for (std::size_t i = 0; i < s; ++i) {
            nearest_[i] = ordered_squared_distance(points_.row(sample_[i]), anchor, anchors_.cols);
        }
        members_[0].resize(s);
        std::iota(members_[0].begin(), members_[0].end(), std::uint32_t{0});
        radius_[0] = std::sqrt(*std::max_element(nearest_.begin(), nearest_.end()));
        for (std::size_t b = 0; b < block_sum_.size(); ++b) {
            refresh_block(b);
        }
    }

    void claim_for(std::size_t j) {
        const std::size_t d = anchors_.cols;
        std::vector<double> gap(j);
#pragma omp parallel for schedule(static) if (parallel_)
        for (std::size_t a = 0; a < j; ++a) {
            gap[a] = std::sqrt(ordered_squared_distance(anchors_.row(a), anchors_.row(j), d));
        }
        // Per previous anchor: the members that move to j. Each anchor's list is filtered by one
        // thread, so the outcome does not depend on the schedule.
        std::vector<std::vector<std::uint32_t>> moved(j);
#pragma omp parallel for schedule(dynamic, 16) if (parallel_)
        for (std::size_t a = 0; a < j; ++a) {
            if (!(gap[a] < 2.0 * radius_[a])) {
                continue;
            }
            std::vector<std::uint32_t>& list = members_[a];
            std::size_t kept = 0;
            double radius = 0.0;
            for (std::uint32_t i : list) {
                const double current = nearest_[i];
                if (gap[a] < 2.0 * std::sqrt(current)) {
                    const double dist = ordered_squared_distance(points_.row(sample_[i]), anchors_.row(j), d);
                    if (dist < current) {
                        nearest_[i] = dist;
                        moved[a].push_back(i);
                        continue;
                    }
                }
                list[kept++] = i;
                radius = std::max(radius, current);
            }
            list.resize(kept);
            radius_[a] = std::sqrt(radius);
        }
        std::vector<std::uint32_t>& mine = members_[j];
        double radius = 0.0;
        std::vector<std::size_t> touched;
        for (const std::vector<std::uint32_t>& list : moved) {
            for (std::uint32_t i : list) {
                mine.push_back(i);
                radius = std::max(radius, nearest_[i]);
                touched.push_back(i / kBlock);
            }
        }
        radius_[j] = std::sqrt(radius);
        std::sort(touched.begin(), touched.end());
        touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
        for (std::size_t b : touched) {
            refresh_block(b);
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

    const Matrix& points_;
    std::vector<std::size_t> sample_;
    Matrix anchors_;
    std::vector<double> nearest_;  // squared distance to the nearest chosen anchor
    std::vector<std::vector<std::uint32_t>> members_;
    std::vector<double> radius_;  // an upper bound of sqrt(nearest) over each anchor's members
    std::vector<double> block_sum_;
    bool parallel_;
};

}  // namespace

std::vector<std::size_t> draw_sample(std::size_t n, std::size_t size, Random& random) {
    std::vector<std::size_t> index(n);
    std::iota(index.begin(), index.end(), std::size_t{0});
    if (size >= n) {
        return index;
    }
    for (std::size_t i = 0; i < size; ++i) {
        std::swap(index[i], index[i + random.below(n - i)]);
    }
    index.resize(size);
    return index;
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

Matrix kmeans_plus_plus(const Matrix& points, std::size_t m, std::size_t sample_size, std::uint64_t seed) {
    Random random(seed);
    DSquaredSampler sampler(points, draw_sample(points.rows, std::max(sample_size, m), random), m);
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

}  // namespace vlattice
