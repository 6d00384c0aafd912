// Every parameter of an annealing run, with its default. The CLI's option names are given beside
// each field; `vlattice compress --help` prints the same defaults from this struct.
#pragma once

#include "vlattice/point_format.hpp"

#include <cstddef>
#include <cstdint>

namespace vlattice {

struct AnnealConfig {
    // Number of anchors m to learn (-m/--anchors). Must satisfy 1 <= m <= n.
    std::size_t anchors = 256;
    // Maximum number of iterations (--iters); the run may stop earlier on convergence.
    int max_iters = 50;

    // Initial temperature T0 (--t0). T controls both the trim fraction and the update step:
    // hot runs trim outliers and move anchors part of the way, cold runs are plain Lloyd steps.
    // 0 runs cold from the start (trimmed Lloyd with trim-final).
    double t0 = 1.0;
    // T <- T * (1 - cooling) per iteration (--cooling), in [0, 1).
    double cooling = 0.3;
    // Below t_floor * T0 the temperature snaps to 0, so the run ends with exact Lloyd steps.
    double t_floor = 1e-3;

    // Share of each anchor's farthest members dropped from its mean while hot (--trim), in [0, 1).
    double trim = 0.1;
    // Share dropped at T = 0 (--trim-final). 0 ends at a k-means fixed point; trim-final = trim
    // gives trimmed k-means throughout.
    double trim_final = 0.0;

    // Merge, split and re-seed every P iterations (--maintenance-every); 0 turns maintenance off.
    // No maintenance runs in the last P iterations or once cold, so Lloyd steps settle its changes.
    int maintenance_every = 5;
    // Anchors closer than merge_factor times the count-weighted mean nearest-anchor spacing merge.
    double merge_factor = 0.05;
    // Anchors whose count or variance exceeds split_factor times the mean are split (2-means).
    double split_factor = 4.0;

    // Stopping (src/fit/stopping_rule.hpp): a run stops once, for `patience` iterations in a row, either
    // the relative energy change and the share of points that changed anchor both stay under
    // `tolerance` (a fixed point), or the energy gains less than `min_gain` of itself per iteration
    // (--min-gain; 0 turns this off). A run that meets either while hot is quenched (T = 0) and must
    // meet one again cold before it stops. Large sets rarely reach a fixed point: 200,000 x 384
    // sentence embeddings with m = 1,024 still had 250 points changing anchor per iteration after 50.
    // There min_gain = 2e-3 stopped after 17 iterations, 0.6 % above the energy of all 50 and 0.1 %
    // above FAISS's after its 25 (2e-3 quenches at iteration 13; 1e-3 only at 18, and stops at 22).
    double tolerance = 1e-4;
    double min_gain = 2e-3;
    int patience = 3;

    // Every run ends by recomputing the energy on the CPU, in double, from the anchors and
    // assignments the backend hands back; a relative difference above validation_tolerance fails the
    // run. validate_every K > 0 (--validate-every) also checks after every K-th assign, which
    // downloads the n assignments each time.
    int validate_every = 0;
    double validation_tolerance = 1e-5;

    // k-means++ runs on a random sample of this many points; 0 picks min(n, 8 * m). Its cost grows
    // with the sample, while the annealing makes the result nearly insensitive to it: on
    // Fashion-MNIST, 8 m instead of 32 m cut the init 5x, and the final energy moved by -0.3 %
    // (m = 1024) and +0.2 % (m = 256).
    std::size_t init_sample = 0;
    // Precision the points are held in during the fit (--storage): f32, or f16/bf16 (half the GPU
    // memory and bandwidth for the points; both backends round the points first, see PointStorage).
    PointStorage storage = PointStorage::f32;
    // exact (--assign-precision): every assignment is the double-precision argmin; fast: the fast
    // distances decide alone (see AssignPrecision).
    AssignPrecision assign_precision = AssignPrecision::exact;

    // Seeds every random choice; the same seed and input give a byte-identical result.
    std::uint64_t seed = 1;
    // OpenMP and BLAS threads (--threads); 0 uses every core.
    int threads = 0;
};

// How product codes (product_codes.hpp) are trained.
struct ProductCodeConfig {
    // M sub-spaces (--subspaces); 0 lets the budget decide. Code bytes per vector: ceil(M * bits / 8).
    std::size_t subspaces = 0;
    // Rotated dimensions p the code covers, between M and d; 0 codes every dimension whose variance
    // is not negligible. Below d, the rotation keeps the p directions of the residuals' largest
    // variance and the rest decode to 0: a p x d rotation and 2^bits x p centroids take fewer of a
    // file's bytes, which a whole-file budget (coding_plan.hpp) trades against the codes.
    std::size_t rotated_dims = 0;
    // Bits per sub-space code (--pq-bits): 4, 8 or 12, 2^bits centroids per sub-space.
    unsigned bits = 8;
    // Additive stages S (--stages): each codes what the stages before it left, with M sub-spaces of
    // its own. Code bytes per vector: ceil(S * M * bits / 8). Only the first stage's rotation is
    // trained by OPQ rounds, and none when M = 1 (a rotation does not change one sub-space's k-means).
    std::size_t stages = 1;
    // Rounds of OPQ after the PCA start (--opq-iters): each trains steering centroids on seven of
    // every eight sample rows, then replaces the rotation by the orthogonal Procrustes solution (an
    // SVD) that best maps those rows onto their codes. 0 keeps the PCA rotation with the variance
    // balanced across the sub-spaces.
    int opq_iters = 4;
    // The rounds stop early, before their next SVD, once a rotation lowers the error of the eighth
    // row (which no round trains on) by less than this share of it, and keep the better of the last
    // two rotations (--opq-min-gain); 0 runs every round and keeps the last. Where OPQ gains nothing
    // this saves the SVDs, the costliest step at large d, and it keeps rotations that fit only the
    // rows they were fitted to.
    double opq_min_gain = 0.001;
    // Share of each cluster's farthest members that the fits of a residual code (M = 1) leave out of
    // its mean once cold (their trim_final), run for all their iterations (min_gain 0). Each such fit
    // is a k-means over every coded dimension, whose plain means chase the few rows far from the
    // rest; trimmed, the stages serve the bulk of the rows: on 300-d word vectors, 10 stages gave both
    // a lower error and a higher recall than with plain means.
    double residual_trim = 0.1;
    // Residuals the rotation and the centroids are trained on, drawn from the rows the code trains on;
    // 0 uses every one. (A run's --train-sample is another sample: the rows of the whole training.)
    std::size_t train_sample = 65536;
    // The annealing run of each sub-space's centroids; anchors is set to 2^bits per fit. Fewer
    // iterations than an anchor fit: 2^bits centroids in a few dimensions settle quickly.
    AnnealConfig kmeans = [] {
        AnnealConfig c;
        c.max_iters = 25;
        c.maintenance_every = 5;
        return c;
    }();
};

// Throws Error naming the first field out of range for a data set of n points.
void validate(const AnnealConfig& config, std::size_t n);

}  // namespace vlattice
