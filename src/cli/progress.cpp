#include "progress.hpp"

#include <cstdio>

namespace vlattice::cli {

namespace {

constexpr int kBarWidth = 20;

}  // namespace

ProgressBar::ProgressBar(bool enabled, int max_iters, std::size_t n)
    : enabled_(enabled), max_iters_(max_iters), n_(n), start_(std::chrono::steady_clock::now()) {}

ProgressBar::~ProgressBar() {
    finish();
}

void ProgressBar::update(const IterationRecord& record) {
    if (!enabled_) {
        return;
    }
    const int done = record.iteration + 1;
    const int filled = max_iters_ > 0 ? done * kBarWidth / max_iters_ : kBarWidth;
    char bar[kBarWidth + 1];
    for (int k = 0; k < kBarWidth; ++k) {
        bar[k] = k < filled ? '#' : '.';
    }
    bar[kBarWidth] = '\0';
    const double changed = n_ > 0 ? 100.0 * static_cast<double>(record.changed) / static_cast<double>(n_) : 0.0;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    // "\033[K" clears what a longer previous line left behind.
    std::fprintf(stderr, "\r[%s] iteration %d/%d  T %.3g  energy %.6g  changed %.2f%%  %.1fs\033[K", bar, done,
                 max_iters_, record.temperature, record.energy, changed, elapsed);
    std::fflush(stderr);
    drawn_ = true;
}

void ProgressBar::finish() {
    if (drawn_) {
        std::fputc('\n', stderr);
        std::fflush(stderr);
        drawn_ = false;
    }
}

}  // namespace vlattice::cli
