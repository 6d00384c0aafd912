#include "progress.hpp"

#include <algorithm>
#include <cstdio>
#include <utility>

namespace vlattice::cli {

namespace {

constexpr int kBarWidth = 20;

// A rate as 3 significant digits with k, M or G: 12.5M.
std::string rate_text(double per_second) {
    const char* unit = "";
    for (const char* next : {"k", "M", "G"}) {
        if (per_second < 1000.0) {
            break;
        }
        per_second /= 1000.0;
        unit = next;
    }
    char text[32];
    std::snprintf(text, sizeof text, "%.3g%s", per_second, unit);
    return text;
}

// Ends a line that was drawn, so that what follows starts on a line of its own.
void end_line(bool& drawn) {
    if (drawn) {
        std::fputc('\n', stderr);
        std::fflush(stderr);
        drawn = false;
    }
}

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
    const double rows_per_second = static_cast<double>(n_) * done / std::max(elapsed, 1e-9);
    // The run may stop before its last iteration, so the time left is at most this.
    const double left = elapsed / done * (max_iters_ - done);
    // "\033[K" clears what a longer previous line left behind.
    std::fprintf(stderr,
                 "\r[%s] iteration %d/%d  T %.3g  energy %.6g  changed %.2f%%  %.1fs  %s rows/s  ETA <= %.0fs\033[K",
                 bar, done, max_iters_, record.temperature, record.energy, changed, elapsed,
                 rate_text(rows_per_second).c_str(), left);
    std::fflush(stderr);
    drawn_ = true;
}

void ProgressBar::finish() {
    end_line(drawn_);
}

PassLine::PassLine(bool enabled, std::string what)
    : enabled_(enabled), what_(std::move(what)), start_(std::chrono::steady_clock::now()), drawn_at_(start_) {}

PassLine::~PassLine() {
    finish();
}

bool PassLine::due(std::chrono::steady_clock::time_point now) const {
    return enabled_ && now - start_ >= std::chrono::milliseconds(500) &&
           (!drawn_ || now - drawn_at_ >= std::chrono::milliseconds(100));
}

void PassLine::draw(std::chrono::steady_clock::time_point now, const std::string& text) {
    std::fprintf(stderr, "\r%s: %s\033[K", what_.c_str(), text.c_str());
    std::fflush(stderr);
    drawn_ = true;
    drawn_at_ = now;
}

void PassLine::bytes(const ReadStatus& status) {
    const auto now = std::chrono::steady_clock::now();
    if (!due(now) || status.total == 0) {
        return;
    }
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    const double share = static_cast<double>(status.done) / static_cast<double>(status.total);
    char text[160];
    std::snprintf(text, sizeof text, "%sB of %sB (%.0f%%), %sB/s, %s rows/s, ETA %.0fs",
                  rate_text(static_cast<double>(status.done)).c_str(),
                  rate_text(static_cast<double>(status.total)).c_str(), 100.0 * share,
                  rate_text(static_cast<double>(status.done) / elapsed).c_str(),
                  rate_text(share * static_cast<double>(status.rows) / elapsed).c_str(),
                  share > 0.0 ? elapsed / share - elapsed : 0.0);
    draw(now, text);
}

void PassLine::rows(std::size_t done, std::size_t total) {
    const auto now = std::chrono::steady_clock::now();
    if (!due(now) || total == 0) {
        return;
    }
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    const double share = static_cast<double>(done) / static_cast<double>(total);
    char text[160];
    std::snprintf(text, sizeof text, "%s of %s rows (%.0f%%), %s rows/s, ETA %.0fs",
                  rate_text(static_cast<double>(done)).c_str(), rate_text(static_cast<double>(total)).c_str(),
                  100.0 * share, rate_text(static_cast<double>(done) / elapsed).c_str(),
                  share > 0.0 ? elapsed / share - elapsed : 0.0);
    draw(now, text);
}

void PassLine::finish() {
    end_line(drawn_);
}

}  // namespace vlattice::cli
