#include "vlattice/codec.hpp"

#include "numeric.hpp"

#include <algorithm>

namespace vlattice {

namespace {

std::string shape(const Matrix& m) {
    return std::to_string(m.rows) + " x " + std::to_string(m.cols);
}

}  // namespace

Matrix reconstruct(const VlatFile& file) {
    const Matrix& anchors = file.anchors;
    if (anchors.cols != file.d || file.assignments.size() != file.n) {
        throw Error("reconstruct: anchors are " + shape(anchors) + " and there are " +
                    std::to_string(file.assignments.size()) + " assignments, but the header says n = " +
                    std::to_string(file.n) + ", d = " + std::to_string(file.d));
    }
    Matrix out(file.n, file.d);
    for (std::size_t i = 0; i < out.rows; ++i) {
        const std::uint32_t a = file.assignments[i];
        if (a >= anchors.rows) {
            throw Error("reconstruct: vector " + std::to_string(i) + " is assigned to anchor " + std::to_string(a) +
                        " but there are only " + std::to_string(anchors.rows) + " anchors");
        }
        std::copy(anchors.row(a), anchors.row(a) + anchors.cols, out.row(i));
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
    const double total = deterministic_sum(a.rows, [&](std::size_t i) { return squared_distance(a.row(i), b.row(i), a.cols); });
    return total / static_cast<double>(a.rows);
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
    }
    return "unknown";
}

}  // namespace vlattice
