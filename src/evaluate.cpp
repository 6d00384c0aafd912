#include "vlattice/evaluate.hpp"

#include "numeric.hpp"

#include <algorithm>
#include <numeric>
#include <string>

namespace vlattice {

double recall_at_k(const Matrix& anchors, const std::vector<std::uint32_t>& assignments, const Matrix& queries,
                   const Matrix& neighbors, std::size_t k) {
    const std::size_t n = assignments.size();
    const std::size_t m = anchors.rows;
    if (queries.cols != anchors.cols) {
        throw Error("recall: queries have " + std::to_string(queries.cols) + " columns, the anchors " +
                    std::to_string(anchors.cols));
    }
    if (neighbors.rows != queries.rows || neighbors.cols < k) {
        throw Error("recall: neighbours are " + std::to_string(neighbors.rows) + " x " +
                    std::to_string(neighbors.cols) + ", expected one row of at least " + std::to_string(k) +
                    " per query (" + std::to_string(queries.rows) + ")");
    }
    if (k == 0 || k > n || queries.rows == 0) {
        throw Error("recall: k = " + std::to_string(k) + " needs 1 <= k <= n = " + std::to_string(n) +
                    " and at least one query");
    }
    // The neighbour ids arrive as float32 (read_vectors), exact only below 2^24.
    if (n > (std::size_t{1} << 24)) {
        throw Error("recall: " + std::to_string(n) + " points; ids above 2^24 do not survive float32");
    }
    // Each anchor's points in index order: the reconstruction is the same for all of them.
    std::vector<std::size_t> start(m + 1, 0);
    for (std::uint32_t a : assignments) {
        if (a >= m) {
            throw Error("recall: an assignment names anchor " + std::to_string(a) + " of " + std::to_string(m));
        }
        ++start[a + 1];
    }
    std::partial_sum(start.begin(), start.end(), start.begin());
    std::vector<std::uint32_t> members(n);
    std::vector<std::size_t> next(start.begin(), start.end() - 1);
    for (std::size_t i = 0; i < n; ++i) {
        members[next[assignments[i]]++] = static_cast<std::uint32_t>(i);
    }

    std::size_t hits = 0;
#pragma omp parallel for schedule(dynamic, 16) reduction(+ : hits)
    for (std::size_t q = 0; q < queries.rows; ++q) {
        std::vector<std::pair<double, std::uint32_t>> by_distance(m);
        for (std::size_t j = 0; j < m; ++j) {
            by_distance[j] = {squared_distance(queries.row(q), anchors.row(j), anchors.cols), static_cast<std::uint32_t>(j)};
        }
        std::sort(by_distance.begin(), by_distance.end());
        std::vector<float> truth(neighbors.row(q), neighbors.row(q) + k);
        std::sort(truth.begin(), truth.end());
        std::size_t found = 0;
        for (std::size_t r = 0; r < m && found < k; ++r) {
            const std::uint32_t a = by_distance[r].second;
            for (std::size_t p = start[a]; p < start[a + 1] && found < k; ++p, ++found) {
                hits += std::binary_search(truth.begin(), truth.end(), static_cast<float>(members[p])) ? 1 : 0;
            }
        }
    }
    return static_cast<double>(hits) / static_cast<double>(queries.rows * k);
}

}  // namespace vlattice
