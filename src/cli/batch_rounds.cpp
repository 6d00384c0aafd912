#include "batch_rounds.hpp"

#include <algorithm>
#include <numeric>

namespace vlattice::cli {

std::vector<std::vector<std::size_t>> job_rounds(const std::vector<std::uint64_t>& input_bytes, int ranks) {
    const auto width = static_cast<std::size_t>(std::max(ranks, 1));
    std::vector<std::size_t> order(input_bytes.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    if (width > 1) {
        std::stable_sort(order.begin(), order.end(),
                         [&](std::size_t a, std::size_t b) { return input_bytes[a] > input_bytes[b]; });
    }
    std::vector<std::vector<std::size_t>> rounds((order.size() + width - 1) / width,
                                                 std::vector<std::size_t>(width, kNoJob));
    for (std::size_t t = 0; t < order.size(); ++t) {
        rounds[t / width][t % width] = order[t];
    }
    return rounds;
}

}  // namespace vlattice::cli
