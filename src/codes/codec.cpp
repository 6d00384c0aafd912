#include "vlattice/codec.hpp"

#include "numeric.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

namespace vlattice {

namespace {

std::string shape(const Matrix& m) {
    return std::to_string(m.rows) + " x " + std::to_string(m.cols);
}

std::string number(float value) {
    char text[32];
    std::snprintf(text, sizeof text, "%.9g", static_cast<double>(value));
    return text;
}

// The residual codes' layout and sizes against the file's n, d and m.
void check_code_shapes(const VlatFile& file) {
    const Matrix& anchors = file.anchors;
    const ResidualCodes& codes = file.residuals;
    const CodeLayout layout = code_layout(codes.layout.bits);
    if (layout.byte != codes.layout.byte || layout.shift != codes.layout.shift ||
        layout.code_bytes != codes.layout.code_bytes) {
        throw Error("the residual code layout is not the one its widths give");
    }
    if ((codes.layout.bits.size() != file.d || codes.offset.rows != anchors.rows || codes.offset.cols != file.d ||
         codes.step.rows != anchors.rows || codes.step.cols != file.d ||
         codes.codes.size() != file.n * codes.layout.code_bytes)) {
        throw Error("residual codes of " + std::to_string(codes.layout.bits.size()) + " widths, " +
                    shape(codes.offset) + " offsets, " + shape(codes.step) + " steps and " +
                    std::to_string(codes.codes.size()) + " code bytes do not fit n = " + std::to_string(file.n) +
                    ", d = " + std::to_string(file.d) + ", m = " + std::to_string(anchors.rows));
    }
}

// Vector i's reconstruction with whichever residual codes the file holds.
void decode_vector(const VlatFile& file, std::size_t i, float* out) {
    if (file.product.empty()) {
        decode_row(file.anchors, file.residuals, file.assignments[i], i, out);
    } else {
        decode_product_row(file.anchors, file.product, file.assignments[i], i, out);
    }
}

template <class Values>
double largest_magnitude(const Values& values) {
    double largest = 0.0;
    for (const float value : values) {
        largest = std::max(largest, std::abs(static_cast<double>(value)));
    }
    return largest;
}

}  // namespace

void check_decodes_finite(const VlatFile& file) {
    const Matrix& anchors = file.anchors;
    for (std::size_t i = 0; i < anchors.data.size(); ++i) {
        if (!std::isfinite(anchors.data[i])) {
            throw Error("section ANCH: anchor " + std::to_string(i / anchors.cols) + ", dimension " +
                        std::to_string(i % anchors.cols) + " is " + number(anchors.data[i]) +
                        " (anchors must be finite)");
        }
    }
    if (!file.product.empty()) {
        check_product_codebook(file.product.book, file.d, largest_magnitude(anchors.data));
    }
    const ResidualCodes& codes = file.residuals;
    if (codes.empty()) {
        return;
    }
    // Every rounding in decode_row is monotone in the code, so the decoded values of codes 0 and
    // 2^width - 1 bound those of every code in between: both finite means all are.
    for (std::size_t j = 0; j < anchors.rows; ++j) {
        for (std::size_t k = 0; k < anchors.cols; ++k) {
            const float c = anchors.row(j)[k];
            const float offset = codes.offset.row(j)[k];
            const float step = codes.step.row(j)[k];
            const unsigned top = (1u << codes.layout.bits[k]) - 1u;
            const float lowest = c + (offset + step * 0.0f);
            const float highest = c + (offset + step * static_cast<float>(top));
            if (!std::isfinite(lowest) || !std::isfinite(highest)) {
                throw Error("section RESI: anchor " + std::to_string(j) + ", dimension " + std::to_string(k) +
                            ": anchor value " + number(c) + " + (offset " + number(offset) + " + step " +
                            number(step) + " x code 0 to " + std::to_string(top) + ") decodes to " +
                            number(std::isfinite(lowest) ? highest : lowest) + " (decoded values must be finite)");
            }
        }
    }
}

void check_compressed_set(const VlatFile& file) {
    const Matrix& anchors = file.anchors;
    if (anchors.cols != file.d || file.assignments.size() != file.n) {
        throw Error("anchors are " + shape(anchors) + " and there are " +
                    std::to_string(file.assignments.size()) + " assignments, but the header says n = " +
                    std::to_string(file.n) + ", d = " + std::to_string(file.d));
    }
    for (std::size_t i = 0; i < file.n; ++i) {
        if (file.assignments[i] >= anchors.rows) {
            throw Error("vector " + std::to_string(i) + " is assigned to anchor " +
                        std::to_string(file.assignments[i]) + " but there are only " + std::to_string(anchors.rows) +
                        " anchors");
        }
    }
    if (!file.residuals.empty() && !file.product.empty()) {
        throw Error("a file holds one kind of residual code, but both scalar and product codes are given");
    }
    if (!file.residuals.empty()) {
        check_code_shapes(file);
    }
    check_decodes_finite(file);
    if (!file.product.empty()) {
        check_product_code_bytes(file.product, file.n);
    }
}

Matrix reconstruct(const VlatFile& file) {
    check_compressed_set(file);
    Matrix out(file.n, file.d);
    const std::ptrdiff_t n = static_cast<std::ptrdiff_t>(file.n);
#pragma omp parallel for schedule(static)
    for (std::ptrdiff_t i = 0; i < n; ++i) {
        decode_vector(file, static_cast<std::size_t>(i), out.row(i));
    }
    return out;
}

double mean_squared_error(const Matrix& a, const Matrix& b) {
    if (a.rows != b.rows || a.cols != b.cols) {
        throw Error("cannot compare a " + shape(a) + " matrix with a " + shape(b) + " one: the shapes differ");
    }
    if (a.rows == 0) {
        throw Error("cannot compute a mean squared error over no rows");
    }
    const double total = deterministic_sum(
        a.rows, [&](std::size_t i) { return squared_distance(a.row(i), b.row(i), a.cols); }, a.cols);
    return total / static_cast<double>(a.rows);
}

double reconstruction_mse(const VlatFile& file, const PointView& points) {
    if (points.rows != file.n || points.cols != file.d || points.rows == 0) {
        throw Error("cannot compare " + std::to_string(points.rows) + " x " + std::to_string(points.cols) +
                    " vectors with a compressed set of " + std::to_string(file.n) + " x " + std::to_string(file.d));
    }
    const double total = deterministic_sum(points.rows, [&](std::size_t i) {
        thread_local std::vector<float> row;
        thread_local std::vector<float> scratch;
        row.resize(points.cols);
        scratch.resize(points.cols);
        decode_vector(file, i, row.data());
        return squared_distance(row.data(), points.row(i, scratch.data()), points.cols);
    }, points.cols);
    return total / static_cast<double>(points.rows);
}

const char* anchor_storage_name(AnchorStorage storage) {
    return storage == AnchorStorage::f16 ? "f16" : "f32";
}

AnchorStorage parse_anchor_storage(const std::string& name) {
    if (name == "f32") {
        return AnchorStorage::f32;
    }
    if (name == "f16") {
        return AnchorStorage::f16;
    }
    throw Error("--anchor-storage: expected f32 or f16, got '" + name + "'");
}

const char* codec_name(ResidualCodec codec) {
    // A switch without default, so that a new codec without a name here is a compiler warning.
    switch (codec) {
    case ResidualCodec::none:
        return "none";
    case ResidualCodec::scalar:
        return "scalar";
    case ResidualCodec::product:
        return "product";
    }
    return "unknown";
}

}  // namespace vlattice
