// Training a product codebook: a PCA start, then rounds of OPQ, then the later additive stages
// (include/vlattice/product_codes.hpp).
#include "vlattice/product_codes.hpp"

#include "codes/pca_rotation.hpp"
#include "codes/procrustes.hpp"
#include "codes/product_error.hpp"
#include "codes/product_training.hpp"
#include "codes/residuals.hpp"
#include "codes/rotation.hpp"
#include "codes/subspace_centroids.hpp"
#include "fit/init.hpp"
#include "numeric.hpp"
#include "random.hpp"

#include <algorithm>
#include <numeric>
#include <string>

namespace vlattice {

namespace {

// The fits of the rounds before the last only steer the rotation: a few cold Lloyd steps from the
// k-means++ seeds do that (FAISS's OPQ also runs 4 k-means iterations per round), and each costs
// about as much as one iteration of the final fit, whose assign over n points and 2^b centroids per
// sub-space dominates training.
AnnealConfig steering_fits(const AnnealConfig& kmeans) {
    AnnealConfig config = kmeans;
    config.max_iters = std::min(config.max_iters, 4);
    config.t0 = 0.0;
    config.maintenance_every = 0;
    return config;
}

void check_config(const ProductCodeConfig& config, std::size_t n, std::size_t d) {
    if (!is_product_code_bits(config.bits)) {
        throw Error("pq-bits is " + std::to_string(config.bits) + "; a sub-space code has 4, 8 or 12 bits");
    }
    if (config.subspaces == 0) {
        throw Error("subspaces must be at least 1 to train product codes, got 0");
    }
    if (config.subspaces > d) {
        throw Error("subspaces is " + std::to_string(config.subspaces) + " but the vectors have only " +
                    std::to_string(d) + " dimensions; use at most " + std::to_string(d));
    }
    if (config.rotated_dims > 0 && (config.rotated_dims < config.subspaces || config.rotated_dims > d)) {
        throw Error("rotated_dims is " + std::to_string(config.rotated_dims) + "; it must lie between the " +
                    std::to_string(config.subspaces) + " sub-spaces and the dimension " + std::to_string(d) +
                    ", or be 0 for every dimension");
    }
    if (config.stages == 0) {
        throw Error("stages must be at least 1 to train product codes, got 0");
    }
    if (!(config.residual_trim >= 0.0 && config.residual_trim < 1.0)) {
        throw Error("residual_trim must be in [0, 1), got " + std::to_string(config.residual_trim));
    }
    if (config.opq_iters < 0) {
        throw Error("opq-iters must be >= 0, got " + std::to_string(config.opq_iters));
    }
    if (!(config.opq_min_gain >= 0.0 && config.opq_min_gain < 1.0)) {
        throw Error("opq-min-gain must be in [0, 1), got " + std::to_string(config.opq_min_gain));
    }
    if (n == 0) {
        throw Error("no vectors to train product codes on");
    }
}

// The residuals of a seeded sample of the n training rows (all of them when the sample is 0 or at
// least n), in row order. row(s) is the s-th training row's index in `points`.
template <class Row>
Matrix sample_residuals(const Matrix& points, std::size_t n, Row row, const Matrix& anchors,
                        const std::vector<std::uint32_t>& assignments, std::size_t sample, std::uint64_t seed) {
    const std::size_t d = points.cols;
    Random random(stream_seed(seed, RandomStream::code_training));
    std::vector<std::size_t> rows = draw_sample(n, sample == 0 ? n : std::min(sample, n), random);
    std::sort(rows.begin(), rows.end());
    Matrix residuals(rows.size(), d);
#pragma omp parallel for schedule(static) if (rows.size() * d >= kParallelValues)
    for (std::size_t s = 0; s < rows.size(); ++s) {
        residual_of(points, anchors, assignments, row(rows[s]), residuals.row(s));
    }
    return residuals;
}

// What the stages so far left of the rotated sample: u[t] <- u[t] - decoded[t], as encoding does.
void subtract(Matrix& left, const Matrix& decoded) {
#pragma omp parallel for schedule(static) if (left.data.size() >= kParallelValues)
    for (std::size_t e = 0; e < left.data.size(); ++e) {
        left.data[e] = left.data[e] - decoded.data[e];
    }
}

// Stages 1 .. S - 1, each trained on what the stages before it left of the rotated sample, with
// seeds past those of the stages before.
void train_later_stages(ProductCodebook& book, Matrix left, const Matrix& first_decoded,
                        const ProductCodeConfig& config, SubspaceFitters& fitters, StageSeconds* seconds) {
    if (config.stages == 1) {
        return;
    }
    subtract(left, first_decoded);
    Matrix centroids(config.stages * book.table(), book.coded_dims());
    std::copy(book.centroids.data.begin(), book.centroids.data.end(), centroids.data.begin());
    for (std::size_t stage = 1; stage < config.stages; ++stage) {
        AnnealConfig kmeans = config.kmeans;
        kmeans.seed = config.kmeans.seed + stage * book.subspaces();
        SubspaceCentroids trained = timed(seconds, "pq.stages", [&] {
            return train_subspace_centroids(left, book.bounds, book.bits, kmeans, fitters);
        });
        std::copy(trained.centroids.data.begin(), trained.centroids.data.end(), centroids.row(stage * book.table()));
        if (stage + 1 < config.stages) {
            subtract(left, trained.decoded);
        }
    }
    book.centroids = std::move(centroids);
    book.stages = config.stages;
}

// The fits of a residual code (one sub-space): trimmed once cold, and run for all their iterations.
ProductCodeConfig residual_fits(ProductCodeConfig config) {
    config.kmeans.trim = std::max(config.kmeans.trim, config.residual_trim);
    config.kmeans.trim_final = config.residual_trim;
    config.kmeans.min_gain = 0.0;
    return config;
}

// OPQ judges its rounds on rows they did not train on: a Procrustes step fits the rotation to the
// rows it maps onto their codes, so their error falls whether or not the rotation serves other
// vectors (on 300-d word vectors at 150 code bytes, four rounds that each lowered the training error
// raised the held-out one). Every eighth row of the sample is judged; the rest train.
constexpr std::uint32_t kJudgedEvery = 8;

struct SteeringRows {
    Matrix trained;
    Matrix judged;
};

SteeringRows steering_rows(const Matrix& residuals) {
    std::vector<std::uint32_t> trained, judged;
    for (std::uint32_t s = 0; s < residuals.rows; ++s) {
        (s % kJudgedEvery == kJudgedEvery - 1 ? judged : trained).push_back(s);
    }
    return {select_rows(residuals, trained), select_rows(residuals, judged)};
}

// The judged rows' error under the book's rotation with a round's steering centroids.
double judged_error(const ProductCodebook& book, const Matrix& centroids, unsigned bits, const Matrix& judged,
                    Backend& backend) {
    ProductCodebook steering;
    steering.bits = bits;
    steering.rotation = book.rotation;
    steering.bounds = book.bounds;
    steering.centroids = centroids;
    const Matrix origin(1, judged.cols);  // the rows are residuals already
    return product_mse(steering, judged, origin, std::vector<std::uint32_t>(judged.rows, 0), backend);
}

// OPQ's rounds from the PCA start in `book`: each fits steering centroids to the trained rows under
// the rotation, then replaces the rotation by the Procrustes solution that best maps those rows
// onto their codes. With opq_min_gain > 0 each rotation is judged on the judged rows (the steering
// fits start from the same seeds every round, so their errors compare); the rounds stop once one
// lowers that error by less than opq_min_gain of itself, keeping the lower of the last two
// rotations, and after opq_iters Procrustes steps. With 0 every round runs and the last rotation
// stays.
void steer_rotation(ProductCodebook& book, const Matrix& residuals, const ProductCodeConfig& config,
                    SubspaceFitters& fitters, Backend& backend, StageSeconds* seconds) {
    const AnnealConfig steering = steering_fits(config.kmeans);
    // Wider codes steer with 8-bit fits: a rotation that serves 256 centroids per sub-space serves
    // 4,096, and each steering fit of 4,096 would cost 16 times as much.
    const unsigned steering_bits = std::min(config.bits, 8u);
    const SteeringRows rows = steering_rows(residuals);
    const bool judge = config.opq_min_gain > 0.0 && rows.judged.rows > 0;
    double best_error = 0.0;
    Matrix best_rotation;
    for (int round = 0; judge || round < config.opq_iters; ++round) {
        const Matrix rotated =
            timed(seconds, "pq.rotate", [&] { return backend.rotate_rows(book.rotation, rows.trained); });
        const SubspaceCentroids trained = timed(seconds, "pq.steer", [&] {
            return train_subspace_centroids(rotated, book.bounds, steering_bits, steering, fitters);
        });
        if (judge) {
            const double error = timed(seconds, "pq.judge", [&] {
                return judged_error(book, trained.centroids, steering_bits, rows.judged, backend);
            });
            if (round > 0 && !(error < best_error * (1.0 - config.opq_min_gain))) {
                if (error > best_error) {
                    book.rotation = std::move(best_rotation);
                }
                return;
            }
            if (round == config.opq_iters) {
                return;
            }
            best_error = error;
            best_rotation = book.rotation;
        }
        book.rotation =
            timed(seconds, "pq.procrustes", [&] { return procrustes_rotation(trained.decoded, rows.trained); });
    }
}

}  // namespace

// The PCA start, the OPQ rounds and the later stages, on a sample's residuals.
ProductCodebook train_product_codebook(const ProductTraining& training, const ProductCodeConfig& requested,
                                       Backend& backend, StageSeconds* seconds) {
    check_config(requested, training.residuals.rows, training.residuals.cols);
    const Matrix& residuals = training.residuals;
    const ProductCodeConfig config = requested.subspaces == 1 ? residual_fits(requested) : requested;

    SubspaceRotation start = pca_rotation(training.directions, config.subspaces, config.rotated_dims);
    ProductCodebook book;
    book.bits = config.bits;
    book.rotation = std::move(start.rotation);
    book.bounds = std::move(start.bounds);
    SubspaceFitters fitters(backend);
    // A rotation moves one sub-space's points rigidly, which does not change their k-means.
    if (config.opq_iters > 0 && book.subspaces() > 1) {
        steer_rotation(book, residuals, config, fitters, backend, seconds);
    }
    // The centroids proper, on every row of the sample.
    const Matrix rotated =
        timed(seconds, "pq.rotate", [&] { return backend.rotate_rows(book.rotation, residuals); });
    SubspaceCentroids trained = timed(seconds, "pq.centroids", [&] {
        return train_subspace_centroids(rotated, book.bounds, book.bits, config.kmeans, fitters);
    });
    book.centroids = std::move(trained.centroids);
    train_later_stages(book, rotated, trained.decoded, config, fitters, seconds);
    return book;
}

ProductTraining product_training(const Matrix& points, const std::vector<std::uint32_t>& rows, const Matrix& anchors,
                                 const std::vector<std::uint32_t>& assignments, std::size_t sample,
                                 std::uint64_t seed, StageSeconds* seconds) {
    check_residual_inputs(points, anchors, assignments, "product-code training");
    for (std::size_t s = 0; s < rows.size(); ++s) {
        if (rows[s] >= points.rows || (s > 0 && rows[s] <= rows[s - 1])) {
            throw Error("product-code training: the training rows must increase and lie below " +
                        std::to_string(points.rows) + "; entry " + std::to_string(s) + " is " +
                        std::to_string(rows[s]));
        }
    }
    if (rows.empty()) {
        throw Error("no vectors to train product codes on");
    }
    ProductTraining out;
    out.residuals = sample_residuals(
        points, rows.size(), [&](std::size_t s) { return rows[s]; }, anchors, assignments, sample, seed);
    out.directions = timed(seconds, "pq.start", [&] { return principal_directions(out.residuals); });
    return out;
}

ProductCodebook train_product_codebook(const Matrix& points, const Matrix& anchors,
                                       const std::vector<std::uint32_t>& assignments,
                                       const ProductCodeConfig& requested, Backend& backend, StageSeconds* seconds) {
    std::vector<std::uint32_t> rows(points.rows);
    std::iota(rows.begin(), rows.end(), 0u);
    return train_product_codebook(points, rows, anchors, assignments, requested, backend, seconds);
}

ProductCodebook train_product_codebook(const Matrix& points, const std::vector<std::uint32_t>& rows,
                                       const Matrix& anchors, const std::vector<std::uint32_t>& assignments,
                                       const ProductCodeConfig& requested, Backend& backend, StageSeconds* seconds) {
    check_config(requested, rows.size(), points.cols);
    const ProductTraining training = product_training(points, rows, anchors, assignments, requested.train_sample,
                                                      requested.kmeans.seed, seconds);
    return train_product_codebook(training, requested, backend, seconds);
}

}  // namespace vlattice
