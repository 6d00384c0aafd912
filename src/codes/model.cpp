// Models: training once, coding many (include/vlattice/model.hpp).
#include "vlattice/model.hpp"

#include "vlattice/half.hpp"
#include "vlattice/point_format.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace vlattice {

Matrix stored_anchors(const Matrix& anchors, AnchorStorage storage) {
    Matrix out = anchors;
    if (storage == AnchorStorage::f16) {
        for (float& value : out.data) {
            value = half_to_float(float_to_half(value));
        }
    }
    return out;
}

namespace {

// The rows of `points`, handed out as float32 copies.
RowSource rows_of(const PointView& points) {
    return {points.rows, points.cols, [points](std::size_t first, std::size_t count, Matrix& tile) {
                tile.rows = count;
                tile.cols = points.cols;
                tile.data.resize(count * points.cols);
                points.widen_rows(first, count, tile.data.data());
            }};
}

// visit(tile, first) for the rows of `source` a tile of `tile_rows` at a time, in order, each in one
// buffer, then progress(rows done, all).
template <class Visit>
void for_each_tile(const RowSource& source, std::size_t tile_rows, const RowProgress& progress, Visit visit) {
    const std::size_t n = source.rows;
    Matrix tile = Matrix::unset(std::min(tile_rows, n), source.cols);
    for (std::size_t first = 0; first < n; first += tile_rows) {
        const std::size_t count = std::min(tile_rows, n - first);
        source.fetch(first, count, tile);
        visit(tile, first);
        if (progress) {
            progress(first + count, n);
        }
    }
}

}  // namespace

std::size_t pass_tile_rows(std::size_t d) {
    return std::max<std::size_t>(1, kPassTileBytes / (std::max<std::size_t>(1, d) * sizeof(float)));
}

std::vector<std::uint32_t> nearest_anchors(const PointView& points, const Matrix& anchors, Backend& backend,
                                           const RowProgress& progress, std::size_t tile_rows) {
    const std::size_t n = points.rows;
    if (tile_rows == 0) {
        tile_rows = pass_tile_rows(points.cols);
    }
    const auto assign = [&](const PointView& rows) {
        backend.upload_points(rows, RunSetup{point_format(rows, PointStorage::f32), AssignPrecision::exact});
        backend.upload_anchors(anchors);
        backend.assign();
        return backend.download_assignments();
    };
    if (n <= tile_rows) {
        std::vector<std::uint32_t> out = n == 0 ? std::vector<std::uint32_t>{} : assign(points);
        if (progress) {
            progress(n, n);
        }
        return out;
    }
    std::vector<std::uint32_t> out;
    out.reserve(n);
    for_each_tile(rows_of(points), tile_rows, progress, [&](const Matrix& tile, std::size_t) {
        const std::vector<std::uint32_t> part = assign(tile);
        out.insert(out.end(), part.begin(), part.end());
    });
    return out;
}

VlatFile make_model(const Matrix& stored, AnchorStorage storage, Metric metric, const TrainedCoding& coding,
                    const std::string& metadata_json) {
    VlatFile model;
    model.n = 0;
    model.d = static_cast<std::uint32_t>(stored.cols);
    model.metric = metric;
    model.anchor_storage = storage;
    model.anchors = stored;
    model.codec = coding.codec;
    if (coding.codec == ResidualCodec::scalar) {
        model.residuals = coding.scalar;
        model.residuals.codes.clear();
    } else if (coding.codec == ResidualCodec::product) {
        model.product.book = coding.product;
    }
    model.metadata_json = metadata_json;
    return model;
}

FitResult reuse_anchors(const VlatFile& source, const PointView& points, Backend& backend,
                        const std::string& source_name) {
    if (points.cols != source.d) {
        throw Error(source_name + ": its anchors have dimension " + std::to_string(source.d) + ", the vectors " +
                    std::to_string(points.cols));
    }
    const auto start = std::chrono::steady_clock::now();
    FitResult result;
    result.anchors = source.anchors;
    result.assignments = nearest_anchors(points, source.anchors, backend);
    result.energy = cpu_energy(points, result.anchors, result.assignments);
    result.converged = true;
    result.stop_reason = "anchors taken from " + source_name;
    result.validation.recomputed_energy = result.energy;
    result.seconds.assign = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    result.seconds.total = result.seconds.assign;
    return result;
}

VlatFile model_of(const VlatFile& file) {
    VlatFile model = file;
    model.n = 0;
    model.assignments.clear();
    model.residuals.codes.clear();
    model.product.codes.clear();
    model.sections.clear();
    model.file_bytes = 0;
    return model;
}

namespace {

// encode_with_model of the rows of `source`, which are `whole` where the caller holds them all.
VlatFile encode_rows(const VlatFile& model, const RowSource& source, const Matrix* whole, Backend& backend,
                     const std::string& metadata_json, StageSeconds* seconds,
                     const std::vector<std::uint32_t>* nearest, const RowProgress& progress, std::size_t tile_rows) {
    const std::size_t n = source.rows;
    if (source.cols != model.d) {
        throw Error("the vectors have dimension " + std::to_string(source.cols) + ", the model " +
                    std::to_string(model.d));
    }
    const auto outside = [&](std::uint32_t anchor) { return anchor >= model.anchors.rows; };
    if (nearest && (nearest->size() != n || std::any_of(nearest->begin(), nearest->end(), outside))) {
        throw Error("encode_with_model: the nearest anchors given are " + std::to_string(nearest->size()) +
                    " ids for " + std::to_string(n) + " vectors, each below the model's " +
                    std::to_string(model.anchors.rows) + " anchors");
    }
    VlatFile file = model_of(model);
    file.n = n;
    file.metadata_json = metadata_json;
    if (nearest && model.codec == ResidualCodec::none) {
        file.assignments = *nearest;  // the ids are the whole code: no row needs reading
        if (progress) {
            progress(n, n);
        }
        return file;
    }
    // Each tile's rows take their nearest anchors, then their codes: one pass in which a backend
    // (and the product code's rotated residuals) holds a tile of the rows, not all of them.
    const auto code_rows = [&](const Matrix& rows, std::size_t first) {
        std::vector<std::uint32_t> assigned =
            nearest ? std::vector<std::uint32_t>(nearest->begin() + static_cast<std::ptrdiff_t>(first),
                                                 nearest->begin() + static_cast<std::ptrdiff_t>(first + rows.rows))
                    : timed(seconds, "anchors", [&] { return nearest_anchors(rows, model.anchors, backend); });
        if (model.codec == ResidualCodec::scalar) {
            timed(seconds, "codes", [&] {
                append_with_ranges(file.residuals, rows, file.anchors, assigned, file.residuals.codes);
            });
        } else if (model.codec == ResidualCodec::product) {
            const std::vector<std::uint8_t> codes =
                encode_product(model.product.book, rows, file.anchors, assigned, backend, seconds);
            file.product.codes.insert(file.product.codes.end(), codes.begin(), codes.end());
        }
        file.assignments.insert(file.assignments.end(), assigned.begin(), assigned.end());
    };
    if (tile_rows == 0) {
        tile_rows = pass_tile_rows(source.cols);
    }
    // Tiles bound what a search for the nearest anchors and a product code hold; with the anchors
    // known, the scalar code and the ids alone hold nothing per row, and copying tiles would only
    // add one.
    const bool tiled = !nearest || model.codec == ResidualCodec::product;
    if (whole != nullptr && (n <= tile_rows || !tiled)) {
        code_rows(*whole, 0);
        if (progress) {
            progress(n, n);
        }
    } else {
        file.assignments.reserve(n);
        for_each_tile(source, tile_rows, progress, code_rows);  // which ends with progress(n, n)
    }
    return file;
}

}  // namespace

VlatFile encode_with_model(const VlatFile& model, const PointView& points, Backend& backend,
                           const std::string& metadata_json, StageSeconds* seconds,
                           const std::vector<std::uint32_t>* nearest, const RowProgress& progress,
                           std::size_t tile_rows) {
    return encode_rows(model, rows_of(points), points.matrix(), backend, metadata_json, seconds, nearest, progress,
                       tile_rows);
}

VlatFile encode_with_model(const VlatFile& model, const RowSource& source, Backend& backend,
                           const std::string& metadata_json, StageSeconds* seconds, const RowProgress& progress,
                           std::size_t tile_rows) {
    return encode_rows(model, source, nullptr, backend, metadata_json, seconds, nullptr, progress, tile_rows);
}

namespace {

bool same_bits(const Matrix& a, const Matrix& b) {
    return a.rows == b.rows && a.cols == b.cols &&
           std::memcmp(a.data.data(), b.data.data(), a.data.size() * sizeof(float)) == 0;
}

void require(bool same, const std::string& what) {
    if (!same) {
        throw Error("the vectors to append were coded with another model: " + what + " differ");
    }
}

}  // namespace

VlatFile append_vectors(const VlatFile& base, const VlatFile& tail) {
    require(base.d == tail.d && base.metric == tail.metric, "the dimension or the metric");
    require(base.anchor_storage == tail.anchor_storage && same_bits(base.anchors, tail.anchors), "the anchors");
    require(base.codec == tail.codec, "the residual codecs");
    const ResidualCodes& a = base.residuals;
    const ResidualCodes& b = tail.residuals;
    require(a.layout.bits == b.layout.bits && same_bits(a.offset, b.offset) && same_bits(a.step, b.step),
            "the scalar widths or ranges");
    const ProductCodebook& p = base.product.book;
    const ProductCodebook& q = tail.product.book;
    require(p.bits == q.bits && p.stages == q.stages && p.bounds == q.bounds && same_bits(p.rotation, q.rotation) &&
                same_bits(p.centroids, q.centroids),
            "the product codebooks");
    VlatFile out = base;
    out.sections.clear();
    out.file_bytes = 0;
    out.n = base.n + tail.n;
    out.assignments.insert(out.assignments.end(), tail.assignments.begin(), tail.assignments.end());
    out.residuals.codes.insert(out.residuals.codes.end(), b.codes.begin(), b.codes.end());
    out.product.codes.insert(out.product.codes.end(), tail.product.codes.begin(), tail.product.codes.end());
    return out;
}

}  // namespace vlattice
