// Product codes on the GPU against the CPU: the same model codes the same bytes on either backend,
// codebooks train through the CUDA backend (its sub-space fits side by side on sibling streams) into
// the CPU's codebook, a budget's candidates trained at once measure and choose as the CPU's trained
// one after the other, and the GPU's decoder gives the CPU's reconstruction bit for bit. Every test
// skips with a warning where no usable GPU is present.
#include <catch2/catch.hpp>

#ifdef VLATTICE_HAVE_CUDA

#include "gpu_usable.hpp"
#include "support.hpp"

#include "vlattice/anneal.hpp"
#include "vlattice/codec.hpp"
#include "vlattice/coding_plan.hpp"
#include "vlattice/cpu_backend.hpp"
#include "vlattice/cuda_backend.hpp"
#include "vlattice/cuda_search.hpp"
#include "vlattice/model.hpp"
#include "vlattice/pipeline.hpp"
#include "vlattice/product_codes.hpp"

#include <cstring>

using namespace vlattice;
using namespace vlattice::test;

TEST_CASE("a product model codes byte-identically on the CPU and the GPU, and decodes identically",
          "[gpu][codes]") {
    if (!gpu_usable()) {
        return;
    }
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    struct Shape {
        std::size_t n, d, m, subspaces;
        unsigned bits;
        std::size_t stages;
    };
    // Product codes of one stage, residual codes of one sub-space per stage, and stages of several;
    // sub-spaces of up to 16, 32 and 64 coordinates and wider (each a kernel of its own).
    for (const Shape shape : {Shape{3000, 32, 16, 8, 8, 1}, Shape{2500, 96, 64, 23, 4, 1},
                              Shape{4000, 784, 32, 49, 8, 1}, Shape{3000, 300, 16, 1, 8, 4},
                              Shape{2000, 64, 16, 5, 4, 3}, Shape{6000, 48, 16, 5, 12, 1},
                              Shape{2000, 96, 16, 4, 8, 1}, Shape{3000, 200, 16, 4, 12, 1}}) {
        INFO("n " << shape.n << ", d " << shape.d << ", M " << shape.subspaces << " x " << shape.bits << ", S "
                  << shape.stages);
        const Matrix points = random_points(shape.n, shape.d, rng, 12);
        AnnealConfig config;
        config.anchors = shape.m;
        config.max_iters = 6;
        const std::unique_ptr<Backend> cpu = make_cpu_backend(0);
        const std::unique_ptr<Backend> gpu = make_cuda_backend(0);
        const FitResult result = fit(points, config, *gpu);
        CodingSpec spec;
        spec.family = CodecFamily::product;
        spec.product.subspaces = shape.subspaces;
        spec.product.stages = shape.stages;
        spec.product.bits = shape.bits;
        spec.product.opq_iters = 1;
        spec.product.kmeans.max_iters = 8;
        TrainedCoding trained;
        const RunInput input{"mix", shape.n, shape.d, Metric::l2};
        // Trained through the CUDA backend: the fits of every sub-space run on the GPU.
        const VlatFile model = train_model(points, result, input, AnchorStorage::f32, spec, *gpu, {}, trained);
        REQUIRE(model.codec == ResidualCodec::product);
        REQUIRE(model.product.book.stages == shape.stages);
        const VlatFile on_cpu = encode_with_model(model, points, *cpu, "{}");
        const VlatFile on_gpu = encode_with_model(model, points, *gpu, "{}");
        CHECK(on_cpu.assignments == on_gpu.assignments);
        CHECK(on_cpu.product.codes == on_gpu.product.codes);

        const Matrix want = reconstruct(on_cpu);
        const Matrix got = reconstruct_cuda(on_cpu, 0);
        REQUIRE(got.data.size() == want.data.size());
        CHECK(std::memcmp(got.data.data(), want.data.data(), want.data.size() * sizeof(float)) == 0);
        CHECK(reconstruction_mse(on_cpu, points) < result.energy);
    }
}

namespace {

// A short CPU fit of `anchors` anchors: the anchors and assignments the codebooks are trained for.
FitResult anchors_on_cpu(const Matrix& points, std::size_t anchors) {
    AnnealConfig config;
    config.anchors = anchors;
    config.max_iters = 6;
    return fit(points, config, *make_cpu_backend(0));
}

}  // namespace

TEST_CASE("the GPU trains the CPU's product codebook and rotates rows to the same bits", "[gpu][codes]") {
    if (!gpu_usable()) {
        return;
    }
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const Matrix points = random_points(3000, 200, rng, 12);
    const FitResult result = anchors_on_cpu(points, 24);
    const std::unique_ptr<Backend> cpu = make_cpu_backend(0);
    const std::unique_ptr<Backend> gpu = make_cuda_backend(0);

    const Matrix rotation = random_points(150, 200, rng, 1);
    const Matrix on_cpu = cpu->rotate_rows(rotation, points);
    const Matrix on_gpu = gpu->rotate_rows(rotation, points);
    REQUIRE(on_gpu.rows == on_cpu.rows);
    REQUIRE(on_gpu.cols == on_cpu.cols);
    CHECK(std::memcmp(on_gpu.data.data(), on_cpu.data.data(), on_cpu.data.size() * sizeof(float)) == 0);

    for (const unsigned bits : {8u, 4u, 12u}) {
        INFO(bits << " bits");
        ProductCodeConfig product;
        product.subspaces = 20;
        product.bits = bits;
        product.opq_iters = 2;
        product.kmeans.max_iters = 8;
        product.kmeans.seed = run_seed;
        const ProductCodebook cpu_book = train_product_codebook(points, result.anchors, result.assignments, product, *cpu);
        const ProductCodebook gpu_book = train_product_codebook(points, result.anchors, result.assignments, product, *gpu);
        CHECK(gpu_book.bounds == cpu_book.bounds);
        CHECK(gpu_book.rotation.data == cpu_book.rotation.data);
        CHECK(gpu_book.centroids.data == cpu_book.centroids.data);
    }
    ProductCodeConfig staged;
    staged.subspaces = 1;
    staged.stages = 3;
    staged.kmeans.max_iters = 8;
    staged.kmeans.seed = run_seed;
    const ProductCodebook cpu_book = train_product_codebook(points, result.anchors, result.assignments, staged, *cpu);
    const ProductCodebook gpu_book = train_product_codebook(points, result.anchors, result.assignments, staged, *gpu);
    CHECK(gpu_book.stages == 3);
    CHECK(gpu_book.rotation.data == cpu_book.rotation.data);
    CHECK(gpu_book.centroids.data == cpu_book.centroids.data);
}

// Under a budget the GPU trains the candidates at once, each on a thread and a sibling of its own,
// their BLAS calls taking turns; the CPU trains them one after the other. Both must measure the
// same errors and keep the same code.
TEST_CASE("a budget's candidates trained at once on the GPU are the CPU's, one after the other", "[gpu][codes]") {
    if (!gpu_usable()) {
        return;
    }
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const Matrix points = random_points(4000, 96, rng, 10);
    const FitResult result = anchors_on_cpu(points, 16);
    const std::unique_ptr<Backend> cpu = make_cpu_backend(0);
    const std::unique_ptr<Backend> gpu = make_cuda_backend(0);
    // Code budgets of 7 and 25 bytes, and a whole-file budget of 30 bytes per vector, under which
    // product codes over fewer rotated dimensions than d are among the candidates.
    for (const double budget : {7.0, 25.0, -30.0}) {
        INFO("budget " << budget << " B");
        CodingSpec spec;
        if (budget > 0.0) {
            spec.budget_bytes = budget;
        } else {
            spec.file_budget.emplace().bytes_per_vector = -budget;
        }
        spec.product.opq_iters = 2;
        spec.product.kmeans.max_iters = 8;
        spec.product.kmeans.seed = run_seed;
        const TrainedCoding on_cpu = train_coding(points, result.anchors, result.assignments, spec, *cpu);
        const TrainedCoding on_gpu = train_coding(points, result.anchors, result.assignments, spec, *gpu);
        REQUIRE(on_gpu.candidates.size() == on_cpu.candidates.size());
        bool truncated = false;
        for (std::size_t c = 0; c < on_cpu.candidates.size(); ++c) {
            INFO(on_cpu.candidates[c].description);
            truncated = truncated || on_cpu.candidates[c].description.find(" dims") != std::string::npos;
            CHECK(on_gpu.candidates[c].description == on_cpu.candidates[c].description);
            CHECK(on_gpu.candidates[c].held_out_mse == on_cpu.candidates[c].held_out_mse);
            CHECK(on_gpu.candidates[c].file_mse == on_cpu.candidates[c].file_mse);
        }
        // The scalar code and the product codes of 8 and 12 bits; under the file budget also 4-bit
        // ones (where their codebook fits), the ids alone and product codes over fewer rotated
        // dimensions (those of equal shape counted once).
        if (spec.file_budget) {
            CHECK(on_cpu.candidates.size() >= 5);
        } else {
            CHECK(on_cpu.candidates.size() == 3);
        }
        CHECK(truncated == spec.file_budget.has_value());
        CHECK(on_gpu.chosen == on_cpu.chosen);
        CHECK(on_gpu.codec == on_cpu.codec);
        CHECK(on_gpu.product.rotation.data == on_cpu.product.rotation.data);
        CHECK(on_gpu.product.centroids.data == on_cpu.product.centroids.data);
        CHECK(on_gpu.scalar.step.data == on_cpu.scalar.step.data);
    }
}

TEST_CASE("nearest anchors in tiles on the GPU are the CPU's in one pass", "[gpu][codes]") {
    if (!gpu_usable()) {
        return;
    }
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const Matrix points = random_points(5003, 40, rng, 12);
    const Matrix anchors = select_rows(points, training_rows(points.rows, 97, run_seed));
    const std::unique_ptr<Backend> cpu = make_cpu_backend(0);
    const std::unique_ptr<Backend> gpu = make_cuda_backend(0);
    const std::vector<std::uint32_t> whole = nearest_anchors(points, anchors, *cpu);
    CHECK(nearest_anchors(points, anchors, *gpu) == whole);
    std::size_t last = 0;
    CHECK(nearest_anchors(points, anchors, *gpu, [&](std::size_t done, std::size_t) { last = done; }, 1000) == whole);
    CHECK(last == points.rows);
}

#endif
