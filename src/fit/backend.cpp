#include "vlattice/backend.hpp"

#include "vlattice/product_codes.hpp"

#include "codes/rotation.hpp"

namespace vlattice {

void require_distinct_anchors(const std::vector<std::uint32_t>& anchors, std::size_t m, const std::string& backend,
                              const char* call) {
    std::vector<bool> listed(m, false);
    for (std::uint32_t j : anchors) {
        if (j >= m) {
            continue;
        }
        if (listed[j]) {
            throw Error(backend + " backend: " + call + ": anchor " + std::to_string(j) + " is listed twice");
        }
        listed[j] = true;
    }
}

void require_rows_below(const std::vector<std::uint32_t>& rows, std::size_t m, const std::string& backend,
                        const char* call) {
    for (std::uint32_t j : rows) {
        if (j >= m) {
            throw Error(backend + " backend: " + call + ": row " + std::to_string(j) + " is outside the " +
                        std::to_string(m) + " anchors");
        }
    }
}

std::vector<MemberSplit> Backend::split_members(const std::vector<std::uint32_t>& anchors, std::size_t limit) {
    return split_each(gather_members(anchors, limit));
}

Matrix Backend::download_anchor_rows(const std::vector<std::uint32_t>& rows) {
    const Matrix all = download_anchors();
    require_rows_below(rows, all.rows, name(), "download_anchor_rows");
    return select_rows(all, rows);
}

NearestRows Backend::nearest_anchors(const std::vector<std::uint32_t>& live) {
    return nearest_rows(select_rows(download_anchors(), live));
}

std::unique_ptr<Backend> Backend::sibling() const {
    throw Error(std::string("the ") + name() + " backend runs no fits side by side");
}

Matrix Backend::rotate_rows(const Matrix& rotation, const Matrix& rows) {
    return vlattice::rotate_rows(rotation, rows);
}

std::vector<std::uint8_t> Backend::encode_product(const ProductCodebook& book, const Matrix& points,
                                                  const Matrix& anchors, const std::vector<std::uint32_t>& assignments) {
    return encode_product_on_cpu(book, points, anchors, assignments);
}

}  // namespace vlattice
