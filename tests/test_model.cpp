// Models and the choice of the residual code: train once, encode many; budgets never exceeded.
#include "support.hpp"

#include "vlattice/anneal.hpp"
#include "vlattice/codec.hpp"
#include "vlattice/coding_plan.hpp"
#include "vlattice/cpu_backend.hpp"
#include "vlattice/format.hpp"
#include "vlattice/io.hpp"
#include "vlattice/model.hpp"
#include "vlattice/pipeline.hpp"
#include "vlattice/rate.hpp"

#include "codes/budget_shapes.hpp"
#include "fit/init.hpp"
#include "random.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <string>

using namespace vlattice;
using namespace vlattice::test;
using Catch::Contains;

namespace {

struct Fitted {
    Matrix points;
    FitResult result;
};

Fitted fitted(std::size_t n, std::size_t d, std::size_t m, std::mt19937_64& rng) {
    Fitted out;
    out.points = random_points(n, d, rng, 12);
    AnnealConfig config;
    config.anchors = m;
    config.max_iters = 8;
    config.threads = 2;
    out.result = fit(out.points, config, *make_cpu_backend(2));
    return out;
}

// Runs the CLI and requires it to succeed, showing what it printed where it did not.
void require_run(const std::string& arguments) {
    const CommandResult done = run_cli(arguments);
    INFO(done.output);
    REQUIRE(done.exit_code == 0);
}

// Two files' anchors, assignments and codes, and the codebooks they were coded with, bit for bit.
void check_same_coding(const VlatFile& a, const VlatFile& b) {
    CHECK(a.anchors.data == b.anchors.data);
    CHECK(a.assignments == b.assignments);
    CHECK(a.codec == b.codec);
    CHECK(a.residuals.codes == b.residuals.codes);
    CHECK(a.product.codes == b.product.codes);
    CHECK(a.product.book.rotation.data == b.product.book.rotation.data);
    CHECK(a.product.book.centroids.data == b.product.book.centroids.data);
}

Matrix rows(const Matrix& points, std::size_t first, std::size_t count) {
    Matrix out(count, points.cols);
    std::copy(points.row(first), points.row(first) + count * points.cols, out.data.begin());
    return out;
}

}  // namespace

TEST_CASE("a budget is never exceeded, and the chosen code is the candidate with the lowest held-out error",
          "[model][codes]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    for (int trial = 0; trial < 6; ++trial) {
        const std::size_t n = 300 + rng() % 1200;
        const std::size_t d = 4 + rng() % 36;
        CodingSpec spec;
        spec.budget_bytes = 0.2 + std::uniform_real_distribution<double>(0.0, 1.2 * static_cast<double>(d))(rng);
        // As compress does: a budget below the ids of m anchors gets fewer anchors.
        const std::size_t m = anchors_within(*spec.budget_bytes, n, 4 + rng() % 28);
        const Fitted f = fitted(n, d, m, rng);
        // Auto on most trials; the residual family, which auto does not try, on every third.
        spec.family = trial % 3 == 2 ? CodecFamily::residual : CodecFamily::automatic;
        spec.product.opq_iters = static_cast<int>(rng() % 2);
        spec.product.kmeans.max_iters = 6;
        spec.product.kmeans.threads = 2;
        INFO("n " << n << ", d " << d << ", m " << f.result.anchors.rows << ", budget " << *spec.budget_bytes
                  << ", codec " << codec_family_name(spec.family));
        const std::unique_ptr<Backend> cpu = make_cpu_backend(2);
        Backend& backend = *cpu;
        TrainedCoding trained;
        const RunInput input{"mix", n, d, Metric::l2};
        const double left = *spec.budget_bytes - assignment_bytes_per_vector(n, f.result.anchors.rows);
        if (spec.family == CodecFamily::residual && left >= 1.0 && left < 2.0) {
            // Room for one code byte: one stage, which is the product code of M = 1, not a residual code.
            CHECK_THROWS_WITH(train_model(f.points, f.result, input, AnchorStorage::f32, spec, backend, {}, trained),
                              Contains("no rq code fits a budget of"));
            continue;
        }
        const VlatFile model = train_model(f.points, f.result, input, AnchorStorage::f32, spec, backend, {}, trained);
        const VlatFile file = encode_with_model(model, f.points, backend, "{}");
        CHECK(code_bytes_per_vector(file) <= *spec.budget_bytes);
        for (const CodingCandidate& candidate : trained.candidates) {
            CHECK(candidate.code_bytes <= *spec.budget_bytes);
            CHECK(trained.candidates[trained.chosen].held_out_mse <= candidate.held_out_mse);
        }
        if (!trained.candidates.empty()) {
            CHECK(file.codec == trained.candidates[trained.chosen].kind.codec);
            CHECK(code_bytes_per_vector(file) == Approx(trained.candidates[trained.chosen].code_bytes));
        }
    }
}

namespace {

TrainedRun budgeted_run(const Matrix& points, std::size_t wanted, const CodingSpec& spec, Backend& backend,
                        AnchorStorage storage = AnchorStorage::f32) {
    AnnealConfig config;
    config.max_iters = 8;
    config.threads = 2;
    const RunInput input{"mix", points.rows, points.cols, Metric::l2};
    CodingSpec sized = spec;
    sized.file_budget->storage = storage;
    return fit_and_train(points, config, anchor_counts(sized, points.rows, points.cols, wanted), input, storage,
                         sized, backend, [&](const AnnealConfig& c) { return fit(points, c, backend); });
}

}  // namespace

TEST_CASE("a whole-file budget is never exceeded, and the run keeps the anchor count and code that measured best",
          "[model][codes]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const std::unique_ptr<Backend> cpu = make_cpu_backend(2);
    for (int trial = 0; trial < 5; ++trial) {
        const std::size_t n = 400 + rng() % 1200;
        const std::size_t d = 4 + rng() % 40;
        const std::size_t wanted = 2 + rng() % 60;
        const AnchorStorage storage = trial % 2 == 0 ? AnchorStorage::f32 : AnchorStorage::f16;
        const Matrix points = random_points(n, d, rng, 12);
        CodingSpec spec;
        spec.family = trial == 4 ? CodecFamily::residual : CodecFamily::automatic;
        spec.product.opq_iters = static_cast<int>(rng() % 2);
        spec.product.kmeans.max_iters = 5;
        spec.product.kmeans.threads = 2;
        spec.file_budget.emplace();
        spec.file_budget->storage = storage;
        // From just above what one anchor, the ids and the metadata take to past the float32 size.
        const double least = static_cast<double>(vlat_file_bytes(budget_file_shape(*spec.file_budget, n, 1, d)));
        spec.file_budget->bytes_per_vector =
            (least + std::uniform_real_distribution<double>(0.0, 5.0 * static_cast<double>(d * n))(rng)) /
            static_cast<double>(n);
        const std::uint64_t total = file_budget_total(*spec.file_budget, n);
        INFO("n " << n << ", d " << d << ", wanted " << wanted << ", budget " << spec.file_budget->bytes_per_vector
                  << ", codec " << codec_family_name(spec.family));
        const TrainedRun run = budgeted_run(points, wanted, spec, *cpu, storage);
        const VlatFile file = encode_with_model(run.model, points, *cpu, run.model.metadata_json);
        ScratchDir dir;
        write_vlat(dir.path("budget.vlat"), file);
        CHECK(std::filesystem::file_size(dir.path("budget.vlat")) <= total);
        REQUIRE(!run.trials.empty());
        const auto kept = [](const AnchorCountTrial& t) { return t.coding.candidates.at(t.coding.chosen); };
        for (const AnchorCountTrial& t : run.trials) {
            CHECK(t.coding.candidates.front().description == "ids only");
            for (const CodingCandidate& candidate : t.coding.candidates) {
                CHECK(candidate.file_bytes * static_cast<double>(n) <= static_cast<double>(total) + 1e-6);
                CHECK(kept(t).held_out_mse <= candidate.held_out_mse);
            }
            CHECK(kept(run.trials[run.chosen]).held_out_mse <= kept(t).held_out_mse);
        }
        CHECK(file.anchors.rows == run.trials[run.chosen].anchors);
        CHECK(file.codec == kept(run.trials[run.chosen]).kind.codec);
        CHECK(nlohmann::json::parse(file.metadata_json)["residuals"]["target_file_bytes"] ==
              spec.file_budget->bytes_per_vector);
    }
}

TEST_CASE("a budget trains 12-bit codes only over 4 or more rotated coordinates per sub-space", "[model][codes]") {
    const std::size_t n = 59000, m = 1024, d = 300;
    const auto widths = [&](const BudgetShapes& shapes) {
        std::set<std::pair<unsigned, std::size_t>> out;
        for (const ProductShape& shape : shapes.product) {
            out.insert({shape.bits, shape.subspaces});
        }
        return out;
    };
    CodingSpec spec;
    // 36.75 B of codes beside 1.25 B of ids: 36 sub-spaces of 8 bits, 24 of 12 (12.5 coordinates each).
    spec.budget_bytes = 38.0;
    CHECK(widths(budget_shapes(spec, n, m, d)) == std::set<std::pair<unsigned, std::size_t>>{{8, 36}, {12, 24}});
    // 148 B: 98 sub-spaces of 12 bits would hold 3 coordinates each.
    spec.budget_bytes = 150.0;
    CHECK(widths(budget_shapes(spec, n, m, d)) == std::set<std::pair<unsigned, std::size_t>>{{8, 148}});
    // A whole-file budget's truncated codes of 1 or 2 coordinates per sub-space are 4- or 8-bit only.
    spec.budget_bytes.reset();
    spec.file_budget.emplace();
    spec.file_budget->bytes_per_vector = 100.0;
    std::size_t wide = 0;
    for (const ProductShape& shape : budget_shapes(spec, n, 64, d).product) {
        INFO(product_description(shape));
        const std::size_t p = shape.rotated_dims == 0 ? d : shape.rotated_dims;
        CHECK((shape.bits <= 8 || p >= 4 * shape.subspaces));
        wide += shape.bits > 8 ? 1 : 0;
    }
    CHECK(wide > 0);
}

TEST_CASE("after a count chose a product code, a whole-file budget still measures the scalar code",
          "[model][codes]") {
    CodingSpec spec;
    spec.file_budget.emplace();
    spec.file_budget->bytes_per_vector = 60.0;
    const std::size_t n = 5000, m = 16, d = 48;
    const BudgetShapes every = budget_shapes(spec, n, m, d);
    REQUIRE(every.scalar_bytes > 0);
    REQUIRE(every.product.size() >= 2);
    const CandidateKind chosen = every.product.front().kind();
    spec.file_budget->only = chosen;
    const BudgetShapes after = budget_shapes(spec, n, m, d);
    CHECK(after.ids_only);
    CHECK(after.scalar_bytes == every.scalar_bytes);
    REQUIRE(after.product.size() == 1);
    CHECK(after.product.front().kind() == chosen);
    // Chosen the scalar code, a count trains no product code.
    spec.file_budget->only = CandidateKind{ResidualCodec::scalar, 0, 0};
    CHECK(budget_shapes(spec, n, m, d).product.empty());
}

// 1,000 vectors of 32 dimensions: 256 anchors take 32 KiB, and with the metadata's allowance leave
// under 3 of the 45 bytes per vector for the ids and codes; 64 anchors leave 27. The budget must
// give up anchors for code bytes, and product codes over fewer rotated dimensions (a 32 x 32
// rotation takes 4 KiB) are among the candidates.
TEST_CASE("a tight whole-file budget trades anchors for code bytes", "[model][codes]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const Matrix points = random_points(1000, 32, rng, 12);
    const std::unique_ptr<Backend> cpu = make_cpu_backend(2);
    CodingSpec spec;
    spec.product.kmeans.max_iters = 5;
    spec.file_budget.emplace().bytes_per_vector = 45.0;
    CHECK(anchor_counts(spec, 1000, 32, 256) == std::vector<std::size_t>{256, 64, 16});
    const TrainedRun run = budgeted_run(points, 256, spec, *cpu);
    REQUIRE(run.trials.size() == 3);
    CHECK(run.trials[run.chosen].anchors < 256);
    bool truncated = false;
    for (const AnchorCountTrial& t : run.trials) {
        for (const CodingCandidate& candidate : t.coding.candidates) {
            truncated = truncated || candidate.description.find(" dims") != std::string::npos;
        }
    }
    CHECK(truncated);

    // At 42.5 bytes per vector 256 anchors leave room for the ids alone; the next counts must still
    // try every kind of code rather than the first count's choice.
    spec.file_budget->bytes_per_vector = 42.5;
    const TrainedRun ids_first = budgeted_run(points, 256, spec, *cpu);
    REQUIRE(ids_first.trials.size() == 3);
    CHECK(ids_first.trials[0].coding.candidates.size() == 1);
    CHECK(ids_first.trials[0].coding.codec == ResidualCodec::none);
    CHECK(ids_first.trials[1].coding.candidates.size() > 2);
    CHECK(ids_first.model.codec != ResidualCodec::none);

    spec.file_budget->bytes_per_vector = 8.0;
    CHECK_THROWS_WITH(anchor_counts(spec, 1000, 32, 256),
                      Contains("a whole-file budget of 8") && Contains("does not hold even one anchor"));
    spec.file_budget->bytes_per_vector = -1.0;
    CHECK_THROWS_WITH(anchor_counts(spec, 1000, 32, 256), Contains("must be a finite number > 0"));
}

TEST_CASE("fit_and_train and train_coding refuse what a whole-file budget cannot honour", "[model][codes]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const Matrix points = random_points(1000, 16, rng, 8);
    const std::unique_ptr<Backend> cpu = make_cpu_backend(2);
    AnnealConfig config;
    config.max_iters = 4;
    config.threads = 2;
    const RunInput input{"mix", points.rows, points.cols, Metric::l2};
    const auto fit_anchors = [&](const AnnealConfig& c) { return fit(points, c, *cpu); };
    CodingSpec spec;
    spec.product.kmeans.max_iters = 4;
    spec.file_budget.emplace().bytes_per_vector = 30.0;
    CHECK_THROWS_WITH(fit_and_train(points, config, {}, input, AnchorStorage::f32, spec, *cpu, fit_anchors),
                      Contains("no anchor count to fit"));
    CHECK_THROWS_WITH(fit_and_train(points, config, {16}, input, AnchorStorage::f16, spec, *cpu, fit_anchors),
                      Contains("sizes the anchors as f32, the model stores them as f16"));
    // Less set aside for the metadata than it takes, at a budget the codes fill (16 bytes would code
    // every dimension at 8 bits): the check of the whole file refuses the result.
    spec.file_budget->bytes_per_vector = 12.0;
    spec.file_budget->metadata_bytes = 16;
    CHECK_THROWS_WITH(fit_and_train(points, config, {16}, input, AnchorStorage::f32, spec, *cpu, fit_anchors),
                      Contains("more than the whole-file budget's 12000") && Contains("than the 16 set aside"));

    const FitResult fitted = fit_anchors(config);
    // 9,000 bytes hold neither the 256 anchors (16 KiB) nor the ids: train_coding, called without
    // anchor_counts' check, says that no code fits beside them.
    spec.file_budget->bytes_per_vector = 9.0;
    spec.file_budget->metadata_bytes = 8192;
    CHECK_THROWS_WITH(train_coding(points, fitted.anchors, fitted.assignments, spec, *cpu),
                      Contains("no auto code fits a whole-file budget of 9") && Contains("beside the anchor ids"));
    spec.budget_bytes = 8.0;
    CHECK_THROWS_WITH(train_coding(points, fitted.anchors, fitted.assignments, spec, *cpu),
                      Contains("a budget of code bytes or of the whole file, not both"));
}

// A residual code of 8 stages of 256 centroids over 600 rows of 16 dimensions learns much of the
// rows it trains on: the file's estimated error, mostly theirs, sits well below the held-out one.
TEST_CASE("a residual code's file error is estimated from its training rows, its choice from held-out ones",
          "[model][codes]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const Fitted f = fitted(600, 16, 8, rng);
    const std::unique_ptr<Backend> cpu = make_cpu_backend(2);
    CodingSpec spec;
    spec.family = CodecFamily::residual;
    spec.budget_bytes = 9.0;
    spec.product.kmeans.max_iters = 6;
    const TrainedCoding trained = train_coding(f.points, f.result.anchors, f.result.assignments, spec, *cpu);
    REQUIRE(trained.candidates.size() == 1);
    CHECK(trained.product.stages == 8);
    CHECK(trained.candidates[0].file_mse < 0.8 * trained.candidates[0].held_out_mse);

    CodingSpec fixed;
    fixed.family = CodecFamily::residual;
    CHECK_THROWS_WITH(train_coding(f.points, f.result.anchors, f.result.assignments, fixed, *cpu),
                      Contains("the residual code needs at least 2 stages or a byte budget"));
}

// Rows drawn for one purpose from a run's seed must not be the rows k-means++ drew from it.
TEST_CASE("each purpose draws its rows from a random stream of its own", "[model][codes]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    CHECK(stream_seed(run_seed, RandomStream::held_out) != run_seed);
    CHECK(stream_seed(run_seed, RandomStream::held_out) != stream_seed(run_seed, RandomStream::code_training));
    const std::size_t n = 100000;
    const SeedingDraws seeding = draw_seeding(n, 64, 1024, run_seed);
    Random held_out(stream_seed(run_seed, RandomStream::held_out));
    const std::vector<std::size_t> drawn = draw_sample(n, 1024, held_out);
    const std::set<std::size_t> seeded(seeding.sample.begin(), seeding.sample.end());
    const auto shared = std::count_if(drawn.begin(), drawn.end(), [&](std::size_t i) { return seeded.count(i) > 0; });
    // Two independent draws of 1,024 of 100,000 rows share about 10.
    CHECK(shared < 50);
}

TEST_CASE("vectors encoded in two parts and appended equal the two parts encoded at once", "[model][codes]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const Fitted f = fitted(900, 16, 16, rng);
    for (const CodecFamily family : {CodecFamily::scalar, CodecFamily::product}) {
        CodingSpec spec;
        spec.family = family;
        spec.budget_bytes = 6.0;
        spec.product.kmeans.max_iters = 6;
        const std::unique_ptr<Backend> cpu = make_cpu_backend(2);
        Backend& backend = *cpu;
        TrainedCoding trained;
        const VlatFile model = train_model(f.points, f.result, {"mix", 900, 16, Metric::l2}, AnchorStorage::f16, spec,
                                           backend, {}, trained);
        const VlatFile whole = encode_with_model(model, f.points, backend, "{}");
        const VlatFile joined = append_vectors(encode_with_model(model, rows(f.points, 0, 400), backend, "{}"),
                                               encode_with_model(model, rows(f.points, 400, 500), backend, "{}"));
        CHECK(joined.n == 900);
        CHECK(joined.assignments == whole.assignments);
        CHECK(joined.residuals.codes == whole.residuals.codes);
        CHECK(joined.product.codes == whole.product.codes);
        CHECK(reconstruction_mse(joined, f.points) == reconstruction_mse(whole, f.points));
        // Nearest anchors handed in (as compress hands in its fit's) code the same file, and ones
        // that do not fit the vectors or the model are refused.
        CHECK(encode_with_model(model, f.points, backend, "{}", nullptr, &whole.assignments).product.codes ==
              whole.product.codes);
        // A tile at a time, with or without the nearest anchors given: the same file, and the
        // progress after each tile.
        for (const std::vector<std::uint32_t>* given : {static_cast<const std::vector<std::uint32_t>*>(nullptr),
                                                        &whole.assignments}) {
            std::vector<std::size_t> seen;
            const VlatFile tiled = encode_with_model(
                model, f.points, backend, "{}", nullptr, given,
                [&](std::size_t done, std::size_t total) {
                    CHECK(total == 900);
                    seen.push_back(done);
                },
                128);
            CHECK(tiled.n == 900);
            CHECK(tiled.assignments == whole.assignments);
            CHECK(tiled.residuals.codes == whole.residuals.codes);
            CHECK(tiled.product.codes == whole.product.codes);
            REQUIRE_FALSE(seen.empty());
            CHECK(seen.back() == 900);
            // The scalar code with its anchors given holds nothing per row: no tiles to copy.
            if (given == nullptr || family == CodecFamily::product) {
                REQUIRE(seen.size() >= 8);
                CHECK(seen[0] == 128);
            } else {
                CHECK(seen.size() == 1);
            }
        }
        const std::vector<std::uint32_t> short_list(899, 0);
        CHECK_THROWS_WITH(encode_with_model(model, f.points, backend, "{}", nullptr, &short_list),
                          Contains("899 ids for 900 vectors"));
        std::vector<std::uint32_t> past = whole.assignments;
        past[5] = static_cast<std::uint32_t>(model.anchors.rows);
        CHECK_THROWS_WITH(encode_with_model(model, f.points, backend, "{}", nullptr, &past),
                          Contains("each below the model's"));

        VlatFile other = model;
        other.anchors.data[3] += 1.0f;
        CHECK_THROWS_WITH(append_vectors(whole, encode_with_model(other, rows(f.points, 0, 10), backend, "{}")),
                          Contains("another model") && Contains("anchors"));
    }
}

TEST_CASE("encode names an unknown --kernel and writes nothing", "[model][cli]") {
    const ScratchDir dir;
    const std::string out = dir.path("e.vlat");
    const CommandResult refused = run_cli("encode --model " + quote(dir.path("m.vlat")) + " " +
                                          quote(dir.path("x.fvecs")) + " -o " + quote(out) + " --kernel tensor");
    INFO(refused.output);
    CHECK(refused.exit_code == 2);
    CHECK_THAT(refused.output, Contains("--kernel") && Contains("'tensor'"));
    CHECK_FALSE(std::filesystem::exists(out));
}

TEST_CASE("train then encode write what compress writes; --anchors-from reuses the anchors", "[model][cli]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const ScratchDir dir;
    const Matrix points = random_points(1500, 24, rng, 10);
    const std::string input = dir.path("x.fvecs");
    write_file(input, [&] {
        std::string bytes;
        for (std::size_t i = 0; i < points.rows; ++i) {
            const std::int32_t d = 24;
            bytes.append(reinterpret_cast<const char*>(&d), 4);
            bytes.append(reinterpret_cast<const char*>(points.row(i)), 24 * sizeof(float));
        }
        return bytes;
    }());
    const std::string run = " -m 32 --iters 8 --device cpu --threads 2 -q";
    for (const std::string codec : {"scalar --target-bytes 9", "pq --target-bytes 9", "pq --subspaces 6 --pq-bits 4",
                                    "rq --target-bytes 9", "rq --stages 3 --pq-bits 4", "pq --subspaces 2 --stages 2",
                                    "auto --target-ratio 10%", "auto --target-file-bytes 40",
                                    "pq --subspaces 3 --pq-bits 12"}) {
        INFO("codec " << codec);
        const std::string compressed = dir.path("c.vlat");
        const std::string model = dir.path("m.vlat");
        const std::string encoded = dir.path("e.vlat");
        require_run("compress " + quote(input) + " -o " + quote(compressed) + run + " --codec " + codec);
        require_run("train " + quote(input) + " -o " + quote(model) + run + " --codec " + codec);
        require_run("encode --model " + quote(model) + " " + quote(input) + " -o " + quote(encoded) + " --device cpu -q");
        const VlatFile a = read_vlat(compressed);
        const VlatFile b = read_vlat(encoded);
        CHECK(read_vlat(model).n == 0);
        check_same_coding(a, b);
        if (codec.rfind("rq", 0) == 0) {
            CHECK(a.product.book.subspaces() == 1);
            CHECK(a.product.book.stages == (codec == "rq --target-bytes 9" ? 8 : 3));
        }
    }

    const std::string first = dir.path("first.vlat");
    const std::string second = dir.path("second.vlat");
    REQUIRE(run_cli("compress " + quote(input) + " -o " + quote(first) + run + " --target-bytes 12").exit_code == 0);
    const CommandResult reused = run_cli("compress " + quote(input) + " -o " + quote(second) +
                                         " --device cpu --threads 2 --target-bytes 5 --anchors-from " + quote(first));
    INFO(reused.output);
    REQUIRE(reused.exit_code == 0);
    CHECK_THAT(reused.output, Contains("anchors taken from"));
    CHECK(read_vlat(first).anchors.data == read_vlat(second).anchors.data);
    CHECK(code_bytes_per_vector(read_vlat(second)) <= 5.0);
}

TEST_CASE("a sample of rows is drawn as the whole shuffle would draw it, in memory of its own size",
          "[model][sample]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    for (const std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{1000}, std::size_t{100003}}) {
        for (const std::size_t size : {std::size_t{1}, n / 2, n - 1, n, n + 5}) {
            if (size == 0) {
                continue;
            }
            INFO("n " << n << ", size " << size);
            // The partial Fisher-Yates over the whole array of indices that draw_sample stands for.
            Random dense_random(run_seed);
            std::vector<std::size_t> index(n);
            std::iota(index.begin(), index.end(), std::size_t{0});
            const std::size_t drawn_size = std::min(size, n);
            if (size < n) {
                for (std::size_t i = 0; i < size; ++i) {
                    std::swap(index[i], index[i + dense_random.below(n - i)]);
                }
            }
            index.resize(drawn_size);
            Random random(run_seed);
            CHECK(draw_sample(n, size, random) == index);
        }
    }
}

TEST_CASE("the rows a run trains on are distinct, in order and fixed by the seed", "[model][sample]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    const std::vector<std::uint32_t> rows = training_rows(50000, 3000, run_seed);
    REQUIRE(rows.size() == 3000);
    CHECK(std::adjacent_find(rows.begin(), rows.end(), std::greater_equal<>()) == rows.end());
    CHECK(rows.back() < 50000);
    CHECK(training_rows(50000, 3000, run_seed) == rows);
    CHECK(training_rows(50000, 3000, run_seed + 1) != rows);
    // Spread over the whole set: about a third of the sample falls in each third of the rows.
    const auto first_third = std::count_if(rows.begin(), rows.end(), [](std::uint32_t r) { return r < 50000 / 3; });
    CHECK(first_third > 800);
    CHECK(first_third < 1200);
    const std::vector<std::uint32_t> all = training_rows(40, 100, run_seed);
    REQUIRE(all.size() == 40);
    for (std::uint32_t r = 0; r < 40; ++r) {
        CHECK(all[r] == r);
    }
}

TEST_CASE("a run trained on a sample of its rows codes every row as encode --model would", "[model][cli]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const ScratchDir dir;
    const std::size_t n = 3000;
    const std::size_t sample = 700;
    const Matrix points = random_points(n, 24, rng, 10);
    const std::string input = dir.path("x.fvecs");
    write_vectors(input, points);
    const std::string sample_input = dir.path("s.fvecs");
    write_vectors(sample_input, select_rows(points, training_rows(n, sample, 11)));
    const std::string run = " -m 32 --iters 8 --device cpu --threads 2 --seed 11 -q";
    for (const std::string codec : {"pq --target-bytes 9", "scalar --target-bytes 9", "pq --subspaces 4",
                                    "rq --stages 2 --pq-bits 4"}) {
        INFO("codec " << codec);
        const std::string compressed = dir.path("c.vlat");
        const std::string model = dir.path("m.vlat");
        const std::string encoded = dir.path("e.vlat");
        require_run("compress " + quote(input) + " -o " + quote(compressed) + run + " --codec " + codec +
                    " --train-sample " + std::to_string(sample));
        require_run("train " + quote(sample_input) + " -o " + quote(model) + run + " --codec " + codec);
        require_run("encode --model " + quote(model) + " " + quote(input) + " -o " + quote(encoded) + " --device cpu -q");
        const VlatFile a = read_vlat(compressed);
        const VlatFile b = read_vlat(encoded);
        REQUIRE(a.n == n);
        check_same_coding(a, b);
        const auto metadata = nlohmann::json::parse(a.metadata_json);
        CHECK(metadata["n"] == n);
        CHECK(metadata["train_rows"] == sample);
    }

    // The summary and the model's say how many rows trained.
    const std::string said = dir.path("said.vlat");
    const std::string loud = " -m 32 --iters 8 --device cpu --threads 2 --seed 11 --train-sample 700";
    CommandResult shown = run_cli("compress " + quote(input) + " -o " + quote(said) + loud);
    REQUIRE(shown.exit_code == 0);
    CHECK_THAT(shown.output, Contains("3000 x 24 (l2), anchors and codes trained on 700 rows"));
    CHECK_THAT(shown.output, Contains("train on 700 of the 3000 rows (--train-sample)"));
    shown = run_cli("train " + quote(input) + " -o " + quote(said) + loud);
    REQUIRE(shown.exit_code == 0);
    CHECK_THAT(shown.output, Contains("3000 x 24 (l2), 700 of them trained on"));

    // A sample of every row is no sample: the same file as without one.
    const std::string whole = dir.path("whole.vlat");
    const std::string all_rows = dir.path("all.vlat");
    REQUIRE(run_cli("compress " + quote(input) + " -o " + quote(whole) + run + " --target-bytes 9").exit_code == 0);
    REQUIRE(run_cli("compress " + quote(input) + " -o " + quote(all_rows) + run + " --target-bytes 9 --train-sample " +
                    std::to_string(n))
                .exit_code == 0);
    CHECK(read_file(whole) == read_file(all_rows));

    const std::string refused = dir.path("refused.vlat");
    const CommandResult small = run_cli("compress " + quote(input) + " -o " + quote(refused) + run +
                                        " --train-sample 20");
    CHECK(small.exit_code != 0);
    CHECK_THAT(small.output, Contains("--train-sample 20 draws fewer rows than the 32 anchors"));
    CHECK_FALSE(std::filesystem::exists(refused));
}

TEST_CASE("nearest anchors found a tile at a time are those of one pass, the exact argmin", "[model]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const Matrix points = random_points(2503, 17, rng, 9);
    // Anchors copied from rows, and one row twice, so that exact ties go to the lower id.
    Matrix anchors = select_rows(points, training_rows(points.rows, 40, run_seed));
    std::copy(anchors.row(3), anchors.row(3) + anchors.cols, anchors.row(30));
    const std::unique_ptr<Backend> backend = make_cpu_backend(2);
    std::vector<std::uint32_t> argmin(points.rows);
    for (std::size_t i = 0; i < points.rows; ++i) {
        double best = std::numeric_limits<double>::infinity();
        for (std::size_t j = 0; j < anchors.rows; ++j) {
            double sum = 0.0;
            for (std::size_t k = 0; k < points.cols; ++k) {
                const double gap = static_cast<double>(points.row(i)[k]) - anchors.row(j)[k];
                sum += gap * gap;
            }
            if (sum < best) {
                best = sum;
                argmin[i] = static_cast<std::uint32_t>(j);
            }
        }
    }
    CHECK(nearest_anchors(points, anchors, *backend) == argmin);
    for (const std::size_t tile : {std::size_t{1}, std::size_t{500}, std::size_t{2502}, std::size_t{2503}}) {
        INFO("tile " << tile);
        std::vector<std::size_t> seen;
        CHECK(nearest_anchors(points, anchors, *backend,
                              [&](std::size_t done, std::size_t total) {
                                  CHECK(total == points.rows);
                                  seen.push_back(done);
                              },
                              tile) == argmin);
        REQUIRE_FALSE(seen.empty());
        CHECK(seen.back() == points.rows);
        CHECK(std::is_sorted(seen.begin(), seen.end()));
        CHECK(seen.size() == (points.rows + tile - 1) / tile);
    }
}

TEST_CASE("a run trained on a sample of a file read by rows codes what one that read it whole codes",
          "[model][cli]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const ScratchDir dir;
    Matrix points = random_points(2600, 20, rng, 10);
    for (const std::size_t zero : {std::size_t{7}, std::size_t{1900}}) {
        std::fill(points.row(zero), points.row(zero) + points.cols, 0.0f);
    }
    // .npy, .fbin, .fvecs and a contiguous HDF5 dataset are read by rows (the sample, then a tile at
    // a time); a chunked HDF5 dataset is read whole.
    const std::string contiguous = dir.path("x.h5");
    write_vectors(contiguous, points);
    const std::string whole = dir.path("chunked.h5");
    run_python("import h5py\n"
               "with h5py.File('" + contiguous + "', 'r') as f, h5py.File('" + whole + "', 'w') as g:\n"
               "    g.create_dataset('train', data=f['train'][:], chunks=(100, 20), compression='gzip')\n");
    const std::string npy = dir.path("x.npy");
    write_vectors(npy, points);
    const std::string fbin = dir.path("x.fbin");
    write_vectors(fbin, points);
    const std::string fvecs = dir.path("x.fvecs");
    write_vectors(fvecs, points);
    for (const std::string options : {" --codec pq --target-bytes 8", " --codec scalar --target-bytes 8",
                                      " --metric angular --target-bytes 8", ""}) {
        INFO("options" << options);
        const std::string run = " -m 24 --iters 6 --device cpu --threads 2 --seed 5 --train-sample 900" + options;
        const CommandResult read_whole = run_cli("compress " + quote(whole) + " -o " + quote(dir.path("w.vlat")) + run);
        INFO(read_whole.output);
        REQUIRE(read_whole.exit_code == 0);
        for (const std::string& by_rows : {npy, fbin, fvecs, contiguous}) {
            INFO(by_rows);
            const CommandResult streamed =
                run_cli("compress " + quote(by_rows) + " -o " + quote(dir.path("s.vlat")) + run);
            INFO(streamed.output);
            REQUIRE(streamed.exit_code == 0);
            check_same_coding(read_vlat(dir.path("w.vlat")), read_vlat(dir.path("s.vlat")));
            CHECK((streamed.output.find("2 vectors are all zero") != std::string::npos) ==
                  (options.find("angular") != std::string::npos));
        }
    }
}

TEST_CASE("a bad value in a file read by rows is named by its row, in the sample or out of it", "[model][cli]") {
    const std::uint64_t run_seed = seed();
    INFO("seed " << run_seed);
    std::mt19937_64 rng(run_seed);
    const ScratchDir dir;
    const std::size_t n = 3000;
    const std::vector<std::uint32_t> sampled = training_rows(n, 400, 5);
    std::uint32_t outside = 0;
    while (std::binary_search(sampled.begin(), sampled.end(), outside)) {
        ++outside;
    }
    for (const std::uint32_t bad : {sampled[123], outside}) {
        INFO("bad row " << bad);
        Matrix points = random_points(n, 12, rng, 6);
        points.row(bad)[4] = std::numeric_limits<float>::quiet_NaN();
        const std::string path = dir.path("x.npy");
        write_vectors(path, points);
        const std::string out = dir.path("out.vlat");
        const CommandResult done = run_cli("compress " + quote(path) + " -o " + quote(out) +
                                           " -m 16 --iters 4 --device cpu --threads 2 --seed 5 --train-sample 400");
        CHECK(done.exit_code != 0);
        CHECK_THAT(done.output, Contains("x.npy: row " + std::to_string(bad) + " (0-based), column 4 (0-based) is NaN"));
        CHECK_FALSE(std::filesystem::exists(out));
    }
}

TEST_CASE("a file read by rows whose only values lie outside the sample and below the scale is refused",
          "[model][cli]") {
    // The sample's rows are all zero, so the fit accepts them; the file's largest value, outside the
    // sample and below the smallest scale vlattice fits, is found by the coding pass and named.
    const ScratchDir dir;
    const std::size_t n = 3000;
    const std::vector<std::uint32_t> sampled = training_rows(n, 400, 5);
    std::uint32_t outside = 0;
    while (std::binary_search(sampled.begin(), sampled.end(), outside)) {
        ++outside;
    }
    Matrix points(n, 12);
    points.row(outside)[2] = 1e-20f;
    const std::string path = dir.path("tiny.npy");
    write_vectors(path, points);
    const std::string out = dir.path("out.vlat");
    const CommandResult done = run_cli("compress " + quote(path) + " -o " + quote(out) +
                                       " -m 4 --iters 3 --device cpu --threads 2 --seed 5 --train-sample 400");
    INFO(done.output);
    CHECK(done.exit_code != 0);
    CHECK_THAT(done.output, Contains("tiny.npy: the largest |value|") &&
                                Contains("row " + std::to_string(outside) + " (0-based), column 2 (0-based)"));
    CHECK_FALSE(std::filesystem::exists(out));
}
