// Encoding vectors with a product codebook (include/vlattice/product_codes.hpp).
#include "vlattice/product_codes.hpp"

#include "codes/column_block.hpp"
#include "vlattice/point_format.hpp"

#include <string>

namespace vlattice {

namespace {

// What encoding needs to stay within the codebook's arrays; check_product_codebook checks the rest.
void check_shape(const ProductCodebook& book, std::size_t d) {
    const auto fail = [](const std::string& what) { throw Error("encode_product: the codebook's " + what); };
    if (!is_product_code_bits(book.bits)) {
        fail("code width is " + std::to_string(book.bits) + " bits, not 4 or 8");
    }
    if (book.empty() || book.bounds.front() != 0 || book.bounds.back() != book.coded_dims()) {
        fail("sub-space bounds do not run from 0 to its " + std::to_string(book.coded_dims()) + " coded dimensions");
    }
    for (std::size_t j = 0; j < book.subspaces(); ++j) {
        if (book.bounds[j + 1] <= book.bounds[j]) {
            fail("sub-space " + std::to_string(j) + " is empty or its bounds decrease");
        }
    }
    if (book.rotation.cols != d) {
        fail("rotation has " + std::to_string(book.rotation.cols) + " columns for " + std::to_string(d) +
             "-dimensional vectors");
    }
    if (book.centroids.rows != (std::size_t{1} << book.bits) || book.centroids.cols != book.coded_dims()) {
        fail("centroids are " + std::to_string(book.centroids.rows) + " x " + std::to_string(book.centroids.cols) +
             ", expected " + std::to_string(std::size_t{1} << book.bits) + " x " +
             std::to_string(book.coded_dims()));
    }
}

}  // namespace

std::vector<std::uint8_t> encode_product(const ProductCodebook& book, const Matrix& points, const Matrix& anchors,
                                         const std::vector<std::uint32_t>& assignments, Backend& backend) {
    check_shape(book, points.cols);
    const std::size_t n = points.rows;
    const std::size_t bytes = book.code_bytes();
    std::vector<std::uint8_t> codes(n * bytes, 0);
    if (n == 0) {
        return codes;
    }
    const Matrix rotated = rotate_residuals(book, points, anchors, assignments);
    for (std::size_t j = 0; j < book.subspaces(); ++j) {
        const std::size_t first = book.bounds[j];
        const std::size_t width = book.bounds[j + 1] - first;
        // The backend may keep a reference to the points until the next upload_points.
        const Matrix values = column_block(rotated, first, width);
        backend.upload_points(values, RunSetup{point_format(values, PointStorage::f32), AssignPrecision::exact});
        backend.upload_anchors(column_block(book.centroids, first, width));
        backend.assign();
        const std::vector<std::uint32_t> ids = backend.download_assignments();
        const std::size_t byte = book.bits == 8 ? j : j / 2;
        const unsigned shift = book.bits == 8 ? 0 : 4 * (j % 2);
        for (std::size_t i = 0; i < n; ++i) {
            codes[i * bytes + byte] |= static_cast<std::uint8_t>(ids[i] << shift);
        }
    }
    return codes;
}

}  // namespace vlattice
