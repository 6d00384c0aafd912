// The compute interface the annealing driver talks to. The CPU backend (src/cpu/) and the CUDA
// backend (cuda/) implement it; the driver (src/fit/anneal.cpp) never sees which one it drives.
// A backend owns the points, the anchors, the assignments, each point's distance to its anchor and
// the per-anchor statistics for the whole run; only m-sized data crosses this interface per
// iteration.
#pragma once

#include "vlattice/collective.hpp"
#include "vlattice/point_format.hpp"
#include "vlattice/point_set.hpp"
#include "vlattice/two_means.hpp"
#include "vlattice/types.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace vlattice {

struct ProductCodebook;

struct AssignStats {
    std::size_t changed = 0;  // points whose anchor differs from the previous assign
    double energy = 0.0;      // mean squared distance to the assigned anchor, in double
};

// Per-anchor results of the last robust_reduce.
struct AnchorStats {
    std::vector<std::uint32_t> count;  // members assigned
    std::vector<std::uint32_t> kept;   // members left after trimming
    std::vector<double> variance;      // mean squared distance of the kept members to their mean
};

// For each of a set of rows, the nearest other row of the set, as an index into the set, and the
// squared distance to it in double.
struct NearestRows {
    std::vector<std::uint32_t> index;
    std::vector<double> distance;
};

// What a run tells the backend with its points.
struct RunSetup {
    PointFormat format;  // the points are already rounded to it
    AssignPrecision precision = AssignPrecision::exact;
};

// gather_members' and split_members' precondition, for every backend: throws Error naming the
// backend, the call and the first anchor below m that is listed twice.
void require_distinct_anchors(const std::vector<std::uint32_t>& anchors, std::size_t m, const std::string& backend,
                              const char* call);
// The precondition of the calls that take anchor rows by id: throws Error naming the backend, the
// call and the first row that is not below m.
void require_rows_below(const std::vector<std::uint32_t>& rows, std::size_t m, const std::string& backend,
                        const char* call);

class Backend {
public:
    virtual ~Backend() = default;

    virtual const char* name() const = 0;

    // Many small independent fits (product-code training's sub-spaces) run side by side, each on a
    // sibling: a backend of the same kind on the same device with its own state (and stream), driven
    // by a thread of its own. side_by_side() is how many are worth running at once; 1 keeps them on
    // this backend, one after the other. A sibling gives the results this backend would.
    virtual std::size_t side_by_side() const { return 1; }
    virtual std::unique_ptr<Backend> sibling() const;
    // Whether whole trainings (a budget's candidate codes) gain from running side by side, each on a
    // sibling of its own: where the fits run on a device, one training's host steps (its SVDs) leave
    // the device to the others' fits. On the CPU they would only share the same cores.
    virtual bool trains_side_by_side() const { return false; }
    // The rows this backend's points are of the whole set, and the ranks that hold the rest (none:
    // total_rows 0, the points are the whole set). A fit's result is then one process's, bit for bit.
    virtual RowShare row_share() const { return RowShare{}; }

    // Once per run, before anything else. Assignments start as "none", so the first assign counts
    // every point as changed. The points may be of any stored type; a backend holds them in that
    // type or in the run's storage format, never as a float32 copy made for the purpose.
    virtual void upload_points(const PointView& points, const RunSetup& setup) = 0;
    // Where the last upload put the points, for the run's report ("held on GPU 0", "uint8 rows
    // streamed from the host in tiles of 4194304 rows"); empty where they stay where they were
    // given (the CPU).
    virtual std::string points_placement() const { return {}; }
    // Replaces all anchors (their number may change between calls).
    virtual void upload_anchors(const Matrix& anchors) = 0;
    // Replaces all anchors with m picked by k-means++ from `points` (the uploaded points): the same
    // anchors on every backend, those of the CPU's kmeans_plus_plus with this sample size and seed.
    virtual void seed_anchors(const PointView& points, std::size_t m, std::size_t sample_size, std::uint64_t seed) = 0;
    // Replaces anchor rows[r] with row r of `values`, for every r; the other anchors stay.
    virtual void upload_anchor_rows(const Matrix& values, const std::vector<std::uint32_t>& rows) = 0;
    virtual Matrix download_anchors() = 0;
    // The listed anchors' rows, in list order (each id below m). What maintenance reads: a copy of
    // all anchors per maintenance cost more than the rest of it (1,024 x 784 on the GPU machine:
    // 2-3 ms, most of it faulting in fresh pages). By default through download_anchors.
    virtual Matrix download_anchor_rows(const std::vector<std::uint32_t>& rows);

    // a(i) = argmin_j ||x_i - c_j||^2, ties to the lowest j, exact: the chosen anchor is the one the
    // same distances computed in double would choose (unless the run asked for AssignPrecision::fast).
    // Keeps each point's distance, in double, for the reduce.
    virtual AssignStats assign() = 0;
    // Per anchor: drop the floor(trim * count) farthest members (ties broken by point index) and
    // average the rest into the robust mean; also count, kept and variance.
    virtual void robust_reduce(double trim) = 0;
    virtual AnchorStats download_stats() = 0;
    // c_j <- c_j + eta * (mu_j - c_j) for every anchor with kept members; others stay.
    virtual void update(double eta) = 0;

    // E = (1/n) sum ||x_i - c_a(i)||^2 for the current anchors and assignments, in double.
    virtual double energy() = 0;
    virtual std::vector<std::uint32_t> download_assignments() = 0;
    // For each listed anchor (distinct ids), its first `limit` members by point index, fewer where it
    // has fewer (none for an id past the anchors): one matrix per listed anchor, in list order, for
    // maintenance splits.
    virtual std::vector<Matrix> gather_members(const std::vector<std::uint32_t>& anchors, std::size_t limit) = 0;
    // split_in_two of the members gather_members would return, one per listed anchor: what
    // maintenance splits with. By default on the CPU; a backend may run it where the members are.
    virtual std::vector<MemberSplit> split_members(const std::vector<std::uint32_t>& anchors, std::size_t limit);
    // Each row's nearest other row of `rows` (at least two), exact and with ties to the lowest index,
    // as assign; for maintenance, which measures the spacing of the anchors.
    virtual NearestRows nearest_rows(const Matrix& rows) = 0;
    // nearest_rows over the listed rows of the current anchors (at least two, each below m once),
    // the indices positions in the list. By default on a downloaded copy.
    virtual NearestRows nearest_anchors(const std::vector<std::uint32_t>& live);

    // The product codes of `points` (encode_product in product_codes.hpp, which checks the shapes
    // first): the same bytes on every backend. Independent of the uploaded points and anchors. By
    // default on the CPU.
    virtual std::vector<std::uint8_t> encode_product(const ProductCodebook& book, const Matrix& points,
                                                     const Matrix& anchors,
                                                     const std::vector<std::uint32_t>& assignments);
    // z = R r for every row r of `rows` (rotate_rows in src/codes/rotation.hpp): the same bits on
    // every backend. By default on the CPU.
    virtual Matrix rotate_rows(const Matrix& rotation, const Matrix& rows);
};

}  // namespace vlattice
