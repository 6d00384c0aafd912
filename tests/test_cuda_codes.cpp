// Product codes on the GPU against the CPU: the same model codes the same bytes on either backend,
// codebooks train through the CUDA backend (its sub-space fits side by side on sibling streams) into
// the CPU's codebook, and the GPU's decoder gives the CPU's reconstruction bit for bit. Every test skips with a warning where no usable GPU is present.
#include <catch2/catch.hpp>

#ifdef VLATTICE_HAVE_CUDA

#include "gpu_usable.hpp"
#include "support.hpp"

#include "vlattice/anneal.hpp"
#include "vlattice/codec.hpp"
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
    // Product codes of one stage, residual codes of one sub-space per stage, and stages of several.
    for (const Shape shape : {Shape{3000, 32, 16, 8, 8, 1}, Shape{2500, 96, 64, 23, 4, 1},
                              Shape{4000, 784, 32, 49, 8, 1}, Shape{3000, 300, 16, 1, 8, 4},
                              Shape{2000, 64, 16, 5, 4, 3}}) {
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

TEST_CASE("the GPU trains the CPU's product codebook and rotates rows to the same bits", "[gpu][codes]") {
    if (!gpu_usable()) {
        return;
    }
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const Matrix points = random_points(3000, 200, rng, 12);
    AnnealConfig config;
    config.anchors = 24;
    config.max_iters = 6;
    const std::unique_ptr<Backend> cpu = make_cpu_backend(0);
    const std::unique_ptr<Backend> gpu = make_cuda_backend(0);
    const FitResult result = fit(points, config, *cpu);

    const Matrix rotation = random_points(150, 200, rng, 1);
    const Matrix on_cpu = cpu->rotate_rows(rotation, points);
    const Matrix on_gpu = gpu->rotate_rows(rotation, points);
    REQUIRE(on_gpu.rows == on_cpu.rows);
    REQUIRE(on_gpu.cols == on_cpu.cols);
    CHECK(std::memcmp(on_gpu.data.data(), on_cpu.data.data(), on_cpu.data.size() * sizeof(float)) == 0);

    for (const unsigned bits : {8u, 4u}) {
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

#endif
