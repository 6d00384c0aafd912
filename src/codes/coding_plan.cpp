// Choosing the residual code by measurement (include/vlattice/coding_plan.hpp).
#include "vlattice/coding_plan.hpp"

#include "codes/budget_shapes.hpp"
#include "codes/product_error.hpp"
#include "codes/product_training.hpp"
#include "numeric.hpp"
#include "random.hpp"
#include "vlattice/rate.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <functional>
#include <memory>
#include <numeric>
#include <thread>

namespace vlattice {

const char* codec_family_name(CodecFamily family) {
    switch (family) {
    case CodecFamily::scalar:
        return "scalar";
    case CodecFamily::product:
        return "pq";
    case CodecFamily::residual:
        return "rq";
    case CodecFamily::automatic:
        break;
    }
    return "auto";
}

CodecFamily parse_codec_family(const std::string& name) {
    for (const CodecFamily family :
         {CodecFamily::automatic, CodecFamily::scalar, CodecFamily::product, CodecFamily::residual}) {
        if (name == codec_family_name(family)) {
            return family;
        }
    }
    throw Error("unknown codec '" + name + "' (expected auto, scalar, pq or rq)");
}

namespace {

// Rows a budget's candidates are measured on, and the rest, which the product codes train on; `seen`
// is as many of the training rows as are held out, spread evenly over them, for the error of the
// rows a codebook trained on. A set too small to split (`split` false) trains on the rows it is
// measured on.
struct HeldOut {
    std::vector<std::uint32_t> measured;
    std::vector<std::uint32_t> training;
    std::vector<std::uint32_t> seen;
    bool split = true;
};

HeldOut hold_out(std::size_t n, std::size_t most, std::uint64_t seed) {
    const std::size_t count = std::max<std::size_t>(1, std::min(most, n / 10));
    std::vector<std::uint32_t> order(n);
    std::iota(order.begin(), order.end(), 0u);
    Random random(stream_seed(seed, RandomStream::held_out));
    for (std::size_t i = 0; i < count; ++i) {
        std::swap(order[i], order[i + random.below(n - i)]);
    }
    HeldOut out;
    out.measured.assign(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(count));
    out.training.assign(order.begin() + static_cast<std::ptrdiff_t>(count), order.end());
    std::sort(out.measured.begin(), out.measured.end());
    std::sort(out.training.begin(), out.training.end());
    if (out.training.empty()) {
        out.training = out.measured;
        out.split = false;
        return out;
    }
    const std::size_t seen = std::min(count, out.training.size());
    for (std::size_t i = 0; i < seen; ++i) {
        out.seen.push_back(out.training[i * out.training.size() / seen]);
    }
    return out;
}

std::vector<std::uint32_t> pick(const std::vector<std::uint32_t>& values, const std::vector<std::uint32_t>& rows) {
    std::vector<std::uint32_t> out(rows.size());
    for (std::size_t r = 0; r < rows.size(); ++r) {
        out[r] = values[rows[r]];
    }
    return out;
}

// Mean over rows of the squared distance between each row and what decode(i, out) reconstructs, the
// same on any number of threads.
template <class Decode>
double mean_error(const Matrix& points, Decode decode) {
    const std::size_t d = points.cols;
    const double total = deterministic_sum(
        points.rows,
        [&](std::size_t i) {
            thread_local std::vector<float> decoded;
            decoded.resize(d);
            decode(i, decoded.data());
            double sum = 0.0;
            for (std::size_t k = 0; k < d; ++k) {
                const double e = static_cast<double>(points.row(i)[k]) - decoded[k];
                sum += e * e;
            }
            return sum;
        },
        d);
    return total / static_cast<double>(points.rows);
}

double scalar_mse(const ResidualCodes& ranges, const Matrix& points, const Matrix& anchors,
                  const std::vector<std::uint32_t>& assignments) {
    ResidualCodes codes = ranges;
    encode_with_ranges(codes, points, anchors, assignments);
    return mean_error(points, [&](std::size_t i, float* out) { decode_row(anchors, codes, assignments[i], i, out); });
}

ProductCodeConfig shaped(ProductCodeConfig config, const ProductShape& shape) {
    config.bits = shape.bits;
    config.subspaces = shape.subspaces;
    config.stages = shape.stages;
    config.rotated_dims = shape.rotated_dims;
    return config;
}

TrainedCoding fixed_coding(const Matrix& points, const Matrix& anchors, const std::vector<std::uint32_t>& assignments,
                           const CodingSpec& spec, Backend& backend) {
    TrainedCoding out;
    if (spec.family == CodecFamily::product || spec.family == CodecFamily::residual) {
        const bool residual = spec.family == CodecFamily::residual;
        if (!residual && spec.product.subspaces == 0) {
            throw Error("the product code needs a number of sub-spaces or a byte budget");
        }
        if (residual && spec.product.stages < 2) {
            throw Error("the residual code needs at least 2 stages or a byte budget");
        }
        out.codec = ResidualCodec::product;
        const ProductShape shape{spec.product.bits, residual ? 1 : spec.product.subspaces, spec.product.stages,
                                  spec.product.rotated_dims};
        out.product =
            train_product_codebook(points, anchors, assignments, shaped(spec.product, shape), backend, &out.seconds);
    } else if (spec.scalar_bits > 0) {
        out.codec = ResidualCodec::scalar;
        out.scalar = learn_residual_ranges(points, anchors, assignments,
                                           std::vector<std::uint8_t>(points.cols, static_cast<std::uint8_t>(spec.scalar_bits)));
    }
    return out;
}

// The rows a candidate is measured on, with their assignments.
struct Sample {
    Matrix points;
    std::vector<std::uint32_t> assignments;
};

Sample sample_of(const Matrix& points, const std::vector<std::uint32_t>& assignments,
                 const std::vector<std::uint32_t>& rows) {
    return {select_rows(points, rows), pick(assignments, rows)};
}

// One candidate of a budget: what it measured (errors, seconds) and its code.
struct Trained {
    CodingCandidate candidate;
    ResidualCodes scalar;     // codec scalar
    ProductCodebook product;  // codec product
};

// job(k, backend) for k < count: one after the other on `backend`, or, where the backend trains side
// by side, each on a host thread and a sibling of its own, with as many OpenMP threads as the
// caller. Every job computes what it would alone (a sibling gives its backend's results; BLAS calls
// take turns, see BlasTurn). The first job's exception, if any, is rethrown once all have ended.
template <class Job>
void run_jobs(std::size_t count, Backend& backend, Job job) {
    if (count < 2 || !backend.trains_side_by_side()) {
        for (std::size_t k = 0; k < count; ++k) {
            job(k, backend);
        }
        return;
    }
    const int threads = omp_get_max_threads();
    std::vector<std::unique_ptr<Backend>> siblings;
    for (std::size_t k = 0; k < count; ++k) {
        siblings.push_back(backend.sibling());
    }
    std::vector<std::exception_ptr> failures(count);
    std::vector<std::thread> running;
    std::exception_ptr unstarted;
    for (std::size_t k = 0; k < count && !unstarted; ++k) {
        try {
            running.emplace_back([&, k] {
                try {
                    omp_set_num_threads(threads);
                    job(k, *siblings[k]);
                } catch (...) {
                    failures[k] = std::current_exception();
                }
            });
        } catch (...) {
            unstarted = std::current_exception();  // no thread: the ones running end first
        }
    }
    for (std::thread& thread : running) {
        thread.join();
    }
    if (unstarted) {
        std::rethrow_exception(unstarted);
    }
    for (const std::exception_ptr& failure : failures) {
        if (failure) {
            std::rethrow_exception(failure);
        }
    }
}

}  // namespace

bool coding_reads_points(const CodingSpec& spec) {
    return spec.budget_bytes || spec.file_budget || spec.family == CodecFamily::product ||
           spec.family == CodecFamily::residual || spec.scalar_bits > 0;
}

TrainedCoding train_coding(const Matrix& points, const Matrix& anchors, const std::vector<std::uint32_t>& assignments,
                           const CodingSpec& spec, Backend& backend) {
    if (spec.budget_bytes && spec.file_budget) {
        throw Error("a coding takes a budget of code bytes or of the whole file, not both");
    }
    if (!spec.budget_bytes && !spec.file_budget) {
        return fixed_coding(points, anchors, assignments, spec, backend);
    }
    // The file's vectors size the ids and the side data's share; the training rows are held out of.
    const std::size_t n = std::max(spec.file_vectors, points.rows);
    const std::size_t training_rows = points.rows;
    const std::size_t d = points.cols;
    const std::size_t m = anchors.rows;
    const double id_bytes = assignment_bytes_per_vector(n, m);
    const BudgetShapes shapes = budget_shapes(spec, n, m, d);
    TrainedCoding out;
    if (shapes.scalar_bytes == 0 && shapes.product.empty() && !shapes.ids_only) {
        if (spec.budget_bytes && *spec.budget_bytes - id_bytes < 1.0) {
            return out;  // the ids alone: no residual code
        }
        throw Error("no " + std::string(codec_family_name(spec.family)) + " code fits " +
                    (spec.file_budget ? "a whole-file budget of " + std::to_string(spec.file_budget->bytes_per_vector)
                                      : "a budget of " + std::to_string(*spec.budget_bytes)) +
                    " bytes per vector beside the anchor ids");
    }
    const HeldOut rows = hold_out(training_rows, spec.held_out, spec.product.kmeans.seed);
    const Sample held_out = sample_of(points, assignments, rows.measured);
    const Sample seen = sample_of(points, assignments, rows.seen);
    // The file codes the held-out rows, and any rows the run did not train on, with a codebook that
    // never saw them and the training rows with one that trained on them (or on a sample of them):
    // its error weighs the two by their counts. The choice goes by the held-out rows alone: what a
    // codebook lowers only on the rows it trained on, it holds in its own bytes, which the budget
    // does not count.
    const double unseen = static_cast<double>((rows.split ? rows.measured.size() : 0) + (n - training_rows));
    const double held_out_share = rows.split || n > training_rows ? unseen / static_cast<double>(n) : 0.0;
    const auto measure = [&](Trained& t, auto mse_of) {
        t.candidate.seconds.time("measure", [&] {
            t.candidate.held_out_mse = mse_of(held_out);
            const double seen_mse = rows.split ? mse_of(seen) : t.candidate.held_out_mse;
            t.candidate.file_mse = held_out_share * t.candidate.held_out_mse + (1.0 - held_out_share) * seen_mse;
        });
    };
    // Under a whole-file budget, the file's bytes per vector with this candidate's trained code.
    const auto file_bytes = [&](Trained& t) {
        if (!spec.file_budget) {
            return;
        }
        VlatShape shape = budget_file_shape(*spec.file_budget, n, m, d);
        set_code_shape(shape, t.candidate.kind.codec, t.scalar, t.product);
        t.candidate.file_bytes = static_cast<double>(vlat_file_bytes(shape)) / static_cast<double>(n);
    };

    std::vector<std::function<void(Trained&, Backend&)>> jobs;
    if (shapes.ids_only) {
        jobs.emplace_back([&](Trained& t, Backend&) {
            t.candidate.kind = {ResidualCodec::none, 0, 0};
            t.candidate.description = "ids only";
            t.candidate.code_bytes = id_bytes;
            file_bytes(t);
            measure(t, [&](const Sample& sample) {
                return mean_error(sample.points, [&](std::size_t i, float* out) {
                    const float* anchor = anchors.row(sample.assignments[i]);
                    std::copy(anchor, anchor + d, out);
                });
            });
        });
    }
    if (shapes.scalar_bytes > 0) {
        jobs.emplace_back([&](Trained& t, Backend&) {
            const std::vector<std::uint8_t> widths = t.candidate.seconds.time(
                "scalar", [&] { return allocate_widths(points, anchors, assignments, 8 * shapes.scalar_bytes); });
            t.scalar = t.candidate.seconds.time(
                "scalar", [&] { return learn_residual_ranges(points, anchors, assignments, widths); });
            t.candidate.kind = {ResidualCodec::scalar, 0, 0};
            t.candidate.description = "scalar " + describe_widths(widths);
            t.candidate.code_bytes = id_bytes + static_cast<double>(t.scalar.layout.code_bytes);
            file_bytes(t);
            measure(t, [&](const Sample& sample) {
                return scalar_mse(t.scalar, sample.points, anchors, sample.assignments);
            });
        });
    }
    // Every product candidate trains on the same sample and starts from its principal directions.
    ProductTraining training;
    if (!shapes.product.empty()) {
        training = product_training(points, rows.training, anchors, assignments, spec.product.train_sample,
                                    spec.product.kmeans.seed, &out.seconds);
    }
    for (const ProductShape& shape : shapes.product) {
        jobs.emplace_back([&, shape](Trained& t, Backend& on) {
            t.product = train_product_codebook(training, shaped(spec.product, shape), on, &t.candidate.seconds);
            t.candidate.kind = shape.kind();
            t.candidate.description = product_description(shape);
            t.candidate.code_bytes = id_bytes + static_cast<double>(t.product.code_bytes());
            file_bytes(t);
            measure(t, [&](const Sample& sample) {
                return product_mse(t.product, sample.points, anchors, sample.assignments, on);
            });
        });
    }
    std::vector<Trained> trained(jobs.size());
    std::vector<double> wall(jobs.size());
    run_jobs(jobs.size(), backend, [&](std::size_t k, Backend& on) {
        const auto start = std::chrono::steady_clock::now();
        jobs[k](trained[k], on);
        wall[k] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    });
    for (std::size_t k = 0; k < trained.size(); ++k) {
        for (const auto& [stage, seconds] : trained[k].candidate.seconds.entries()) {
            out.seconds.add(stage, seconds);
        }
        trained[k].candidate.seconds.add("wall", wall[k]);
        out.candidates.push_back(trained[k].candidate);
    }
    std::size_t best = 0;
    for (std::size_t c = 1; c < out.candidates.size(); ++c) {
        if (out.candidates[c].held_out_mse < out.candidates[best].held_out_mse) {
            best = c;
        }
    }
    out.chosen = best;
    out.codec = out.candidates[best].kind.codec;
    out.scalar = std::move(trained[best].scalar);
    out.product = std::move(trained[best].product);
    return out;
}

}  // namespace vlattice
