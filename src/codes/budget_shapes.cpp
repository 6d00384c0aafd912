// The candidates a budget allows (codes/budget_shapes.hpp), and the anchor counts of a whole-file
// budget (include/vlattice/coding_plan.hpp).
#include "codes/budget_shapes.hpp"

#include "vlattice/rate.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <sstream>

namespace vlattice {

namespace {

constexpr std::size_t kMostBudgetStages = 64;

// The product codes' widths a budget tries, each with as many sub-spaces as its bytes allow; the
// held-out error decides. 12-bit codes need rows to train 4,096 centroids per sub-space: on small
// sets their held-out error can be above that of the 8-bit ones. 4-bit codes win only where their
// 16 centroids per sub-space save file bytes: a code budget, which does not count the codebook,
// never chose them on the sets measured (docs/benchmarks.md), so it does not train them.
constexpr std::array<unsigned, 2> kCodeBudgetBits = {8, 12};
constexpr std::array<unsigned, 3> kFileBudgetBits = {8, 4, 12};

// Rotated dimensions a sub-space of a code wider than 8 bits has at least. Below that a code spends
// 3 or more bits per coordinate, where the 8-bit code comes close, and the 4,096-way nearest
// centroid per few coordinates makes it the costliest candidate by far on the CPU: on the word
// vectors at 150 B (98 sub-spaces of 3 coordinates) the 12-bit code was 4 % better held out than
// the 8-bit one, and made `compress` on 2 cores many times slower than FAISS's PQ150.
constexpr std::size_t kWideCodeMinDims = 4;

// Whether a budget trains `shape` (over p rotated dimensions, or d when it says 0).
bool worth_training(const ProductShape& shape, std::size_t d) {
    const std::size_t p = shape.rotated_dims == 0 ? d : shape.rotated_dims;
    return shape.bits <= 8 || p >= kWideCodeMinDims * shape.subspaces;
}

// A whole-file budget tries the largest kAnchorCounts of -m, -m / 4, -m / 16, ... whose anchors
// fit: each is a fit of its own, and a count between two of them rarely wins by much.
constexpr std::size_t kAnchorCounts = 3;
constexpr std::size_t kAnchorStep = 4;

// Rotated dimensions per sub-space of the truncated product codes a whole-file budget tries beside
// the one over every dimension: the rotation (p x d) and the centroids (2^b x p) grow with p, so at
// a small budget a code over the directions of most variance leaves more bytes for sub-spaces. One
// dimension per sub-space is a scalar quantiser per rotated coordinate with 2^b learned levels, a
// candidate beside the scalar code's evenly spaced ones; the held-out error decides between them.
constexpr std::array<std::size_t, 3> kTruncatedDimsPerSubspace = {1, 2, 4};

void check_file_budget(const FileBudget& budget) {
    if (!std::isfinite(budget.bytes_per_vector) || budget.bytes_per_vector <= 0.0) {
        throw Error("the whole-file budget per vector must be a finite number > 0, not " +
                    std::to_string(budget.bytes_per_vector));
    }
}

// The product and residual codes a budget of `bytes` whole code bytes beside the ids allows.
std::vector<ProductShape> code_budget_products(CodecFamily family, std::size_t bytes, std::size_t d) {
    std::vector<ProductShape> out;
    if (family == CodecFamily::automatic || family == CodecFamily::product) {
        for (const unsigned bits : kCodeBudgetBits) {
            // Whole code bytes: an odd number of 12-bit codes still takes its last byte.
            const std::size_t subspaces = bytes * 8 / bits;
            // A sub-space of one rotated dimension is a scalar code; the scalar family covers those rates.
            const ProductShape shape{bits, subspaces, 1, 0};
            if (subspaces > 0 && 2 * subspaces <= d && worth_training(shape, d)) {
                out.push_back(shape);
            }
        }
    }
    // One stage of one sub-space is the product code of M = 1. Each stage is a k-means over every
    // coded dimension, so a budget trains at most kMostBudgetStages of them. Auto does not try the
    // residual code: on the sets measured (docs/benchmarks.md) its held-out error was above the
    // product code's at every budget, and its training cost more.
    if (family == CodecFamily::residual && bytes >= 2) {
        out.push_back({8, 1, std::min(bytes, kMostBudgetStages), 0});
    }
    return out;
}

BudgetShapes code_budget_shapes(const CodingSpec& spec, std::size_t n, std::size_t m, std::size_t d) {
    BudgetShapes out;
    const double left = *spec.budget_bytes - assignment_bytes_per_vector(n, m);
    if (left < 1.0) {
        return out;
    }
    if (spec.family == CodecFamily::automatic || spec.family == CodecFamily::scalar) {
        out.scalar_bytes = residual_bytes_within(*spec.budget_bytes, n, m, d);
    }
    out.product = code_budget_products(spec.family, static_cast<std::size_t>(std::floor(left)), d);
    return out;
}

VlatShape product_file(VlatShape shape, const ProductShape& product) {
    shape.codec = ResidualCodec::product;
    shape.bits = product.bits;
    shape.subspaces = product.subspaces;
    shape.stages = product.stages;
    shape.rotated_dims = product.rotated_dims == 0 ? shape.d : product.rotated_dims;
    return shape;
}

// The largest count in [low, high] for which fits(count) holds, fits being true up to some count and
// false past it; 0 when fits(low) is false.
template <class Fits>
std::size_t largest_fitting(std::size_t low, std::size_t high, Fits fits) {
    if (low > high || !fits(low)) {
        return 0;
    }
    while (low < high) {
        const std::size_t middle = low + (high - low + 1) / 2;
        if (fits(middle)) {
            low = middle;
        } else {
            high = middle - 1;
        }
    }
    return low;
}

BudgetShapes file_budget_shapes(const CodingSpec& spec, std::size_t n, std::size_t m, std::size_t d) {
    const FileBudget& budget = *spec.file_budget;
    const std::uint64_t total = file_budget_total(budget, n);
    const VlatShape ids = budget_file_shape(budget, n, m, d);
    const auto fits = [&](const VlatShape& shape) { return vlat_file_bytes(shape) <= total; };
    BudgetShapes out;
    out.ids_only = fits(ids);
    if (!out.ids_only) {
        return out;
    }
    // The scalar code learns its ranges in one pass over the members, without a codebook to fit, so
    // it is measured at every count: a count whose side data leaves it more bits can win with it.
    const auto allowed = [&](const CandidateKind& kind) {
        return !budget.only || *budget.only == kind || kind.codec == ResidualCodec::scalar;
    };
    if (spec.family == CodecFamily::automatic || spec.family == CodecFamily::scalar) {
        VlatShape scalar = ids;
        scalar.codec = ResidualCodec::scalar;
        out.scalar_bytes = largest_fitting(1, d, [&](std::size_t bytes) {
            scalar.scalar_code_bytes = bytes;
            return fits(scalar);
        });
    }
    const auto add = [&](const ProductShape& shape) {
        if (!allowed(shape.kind()) || !worth_training(shape, d)) {
            return;
        }
        const bool known = std::any_of(out.product.begin(), out.product.end(),
                                       [&](const ProductShape& s) { return s.same_code(shape); });
        if (!known) {
            out.product.push_back(shape);
        }
    };
    if (spec.family == CodecFamily::automatic || spec.family == CodecFamily::product) {
        for (const unsigned bits : kFileBudgetBits) {
            for (const std::size_t per_subspace : kTruncatedDimsPerSubspace) {
                if (bits > 8 && per_subspace < kWideCodeMinDims) {
                    continue;  // worth_training turns every count of these down
                }
                const auto shape_of = [&](std::size_t subspaces) {
                    const std::size_t p = std::min(d, per_subspace * subspaces);
                    return ProductShape{bits, subspaces, 1, p == d ? 0 : p, per_subspace};
                };
                const std::size_t subspaces = largest_fitting(1, d / std::min<std::size_t>(per_subspace, 2),
                                                              [&](std::size_t count) {
                                                                  return fits(product_file(ids, shape_of(count)));
                                                              });
                if (subspaces > 0) {
                    add(shape_of(subspaces));
                }
            }
            const std::size_t subspaces = largest_fitting(
                1, d / 2, [&](std::size_t count) { return fits(product_file(ids, {bits, count, 1, 0})); });
            if (subspaces > 0) {
                add({bits, subspaces, 1, 0});
            }
        }
    }
    if (spec.family == CodecFamily::residual) {
        const std::size_t stages = largest_fitting(
            2, kMostBudgetStages, [&](std::size_t count) { return fits(product_file(ids, {8, 1, count, 0})); });
        if (stages > 0) {
            add({8, 1, stages, 0});
        }
    }
    return out;
}

}  // namespace

std::string product_description(const ProductShape& shape) {
    if (shape.subspaces == 1 && shape.stages > 1) {
        return "rq S = " + std::to_string(shape.stages) + " x " + std::to_string(shape.bits) + " bits";
    }
    const std::string stages = shape.stages > 1 ? " in " + std::to_string(shape.stages) + " stages" : "";
    const std::string dims = shape.rotated_dims > 0 ? " over " + std::to_string(shape.rotated_dims) + " dims" : "";
    return "pq M = " + std::to_string(shape.subspaces) + " x " + std::to_string(shape.bits) + " bits" + stages + dims;
}

BudgetShapes budget_shapes(const CodingSpec& spec, std::size_t n, std::size_t m, std::size_t d) {
    return spec.file_budget ? file_budget_shapes(spec, n, m, d) : code_budget_shapes(spec, n, m, d);
}

VlatShape budget_file_shape(const FileBudget& budget, std::size_t n, std::size_t m, std::size_t d) {
    VlatShape shape;
    shape.n = n;
    shape.d = d;
    shape.m = m;
    shape.storage = budget.storage;
    shape.metadata_bytes = budget.metadata_bytes;
    return shape;
}

std::uint64_t file_budget_total(const FileBudget& budget, std::size_t n) {
    check_file_budget(budget);
    const double total = std::floor(budget.bytes_per_vector * static_cast<double>(n));
    // 2^64 bytes is more than any file; the cap keeps the conversion defined.
    return total >= 0x1p64 ? UINT64_MAX : static_cast<std::uint64_t>(total);
}

std::vector<std::size_t> file_budget_anchor_counts(const FileBudget& budget, std::size_t n, std::size_t d,
                                                   std::size_t wanted) {
    const std::uint64_t total = file_budget_total(budget, n);
    std::vector<std::size_t> out;
    std::size_t m = std::max<std::size_t>(1, std::min(wanted, n));
    for (;;) {
        if (vlat_file_bytes(budget_file_shape(budget, n, m, d)) <= total) {
            out.push_back(m);
        }
        if (m == 1 || out.size() == kAnchorCounts) {
            break;
        }
        m = std::max<std::size_t>(1, m / kAnchorStep);
    }
    if (out.empty()) {
        std::ostringstream bytes;  // as the user typed it: 2.5, not 2.500000
        bytes << budget.bytes_per_vector;
        throw Error("a whole-file budget of " + bytes.str() + " bytes per vector (" +
                    std::to_string(total) + " bytes for " + std::to_string(n) + " vectors) does not hold even one "
                    "anchor of " + std::to_string(d) + " dimensions with the ids and the metadata (" +
                    std::to_string(vlat_file_bytes(budget_file_shape(budget, n, 1, d))) + " bytes, " +
                    std::to_string(budget.metadata_bytes) + " of them set aside for the metadata)");
    }
    return out;
}

}  // namespace vlattice
