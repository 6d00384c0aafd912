#include "parallel/row_share.hpp"

#include "fit/member_lists.hpp"
#include "numeric.hpp"

#include <algorithm>
#include <cstring>
#include <string>

namespace vlattice {

namespace {

// The bits of `values`, in 64-bit words (a last word half full), summed over the ranks.
template <class T>
void share_bits(Collective& ranks, T* values, std::size_t count) {
    if (ranks.size() == 1 || count == 0) {
        return;
    }
    const std::size_t bytes = count * sizeof(T);
    std::vector<std::uint64_t> words((bytes + 7) / 8, 0);
    std::memcpy(words.data(), values, bytes);
    ranks.sum(words.data(), words.size());
    std::memcpy(values, words.data(), bytes);
}

}  // namespace

RowRange rank_rows(std::uint64_t n, int size, int rank) {
    const std::uint64_t blocks = (n + kSumBlock - 1) / kSumBlock;
    const std::uint64_t begin = blocks * static_cast<std::uint64_t>(rank) / static_cast<std::uint64_t>(size);
    const std::uint64_t end = blocks * static_cast<std::uint64_t>(rank + 1) / static_cast<std::uint64_t>(size);
    const std::uint64_t first = std::min(n, begin * kSumBlock);
    return {first, std::min(n, end * kSumBlock) - first};
}

void share_values(Collective& ranks, float* values, std::size_t count) { share_bits(ranks, values, count); }
void share_values(Collective& ranks, double* values, std::size_t count) { share_bits(ranks, values, count); }
void share_values(Collective& ranks, std::uint32_t* values, std::size_t count) { share_bits(ranks, values, count); }

std::vector<std::string> gather_texts(Collective& ranks, const std::string& mine) {
    const auto size = static_cast<std::size_t>(ranks.size());
    std::vector<std::uint64_t> lengths(size, 0);
    lengths[static_cast<std::size_t>(ranks.rank())] = mine.size();
    ranks.sum(lengths.data(), size);
    // Each text from a word of its own on.
    std::vector<std::size_t> first_word(size + 1, 0);
    for (std::size_t r = 0; r < size; ++r) {
        first_word[r + 1] = first_word[r] + (lengths[r] + 7) / 8;
    }
    std::vector<std::uint64_t> words(first_word[size], 0);
    if (!mine.empty()) {
        std::memcpy(words.data() + first_word[static_cast<std::size_t>(ranks.rank())], mine.data(), mine.size());
    }
    ranks.sum(words.data(), words.size());
    std::vector<std::string> texts(size);
    for (std::size_t r = 0; r < size; ++r) {
        texts[r].assign(reinterpret_cast<const char*>(words.data() + first_word[r]), lengths[r]);
    }
    return texts;
}

Matrix gather_rows(const RowShare& share, const PointView& points, const std::vector<std::size_t>& rows) {
    Matrix out(rows.size(), points.cols);
    for (std::size_t r = 0; r < rows.size(); ++r) {
        if (rows[r] >= share.first_row && rows[r] - share.first_row < points.rows) {
            points.widen_rows(rows[r] - share.first_row, 1, out.row(r));
        }
    }
    share_values(*share.ranks, out.data.data(), out.data.size());
    return out;
}

std::vector<Matrix> gather_shared_members(const RowShare& share, const PointView& points,
                                          const std::vector<std::uint32_t>& assignment, std::size_t m,
                                          const std::vector<std::uint32_t>& anchors, std::size_t limit) {
    std::vector<Matrix> mine = gather_member_rows(points, assignment, m, anchors, limit);
    Collective& ranks = *share.ranks;
    if (ranks.size() == 1) {
        return mine;
    }
    // Every rank's count for every anchor, so that each knows where its rows go.
    const std::size_t listed = anchors.size();
    std::vector<std::uint64_t> counts(static_cast<std::size_t>(ranks.size()) * listed, 0);
    for (std::size_t t = 0; t < listed; ++t) {
        counts[static_cast<std::size_t>(ranks.rank()) * listed + t] = mine[t].rows;
    }
    ranks.sum(counts.data(), counts.size());
    std::vector<Matrix> out;
    out.reserve(listed);
    for (std::size_t t = 0; t < listed; ++t) {
        std::size_t before = 0, total = 0;
        for (int r = 0; r < ranks.size(); ++r) {
            const std::size_t count = counts[static_cast<std::size_t>(r) * listed + t];
            before += r < ranks.rank() ? count : 0;
            total += count;
        }
        Matrix rows(std::min(total, limit), points.cols);
        const std::size_t taken = before < rows.rows ? std::min(mine[t].rows, rows.rows - before) : 0;
        std::copy(mine[t].data.begin(), mine[t].data.begin() + taken * points.cols,
                  rows.data.begin() + before * points.cols);
        out.push_back(std::move(rows));
    }
    for (Matrix& rows : out) {
        share_values(ranks, rows.data.data(), rows.data.size());
    }
    return out;
}

}  // namespace vlattice
