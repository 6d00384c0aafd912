// The one-line progress displays of a run, redrawn in place on stderr: the read of the input, and
// the fit's iterations.
#pragma once

#include "vlattice/anneal.hpp"
#include "vlattice/io.hpp"

#include <chrono>
#include <cstddef>
#include <string>

namespace vlattice::cli {

class ProgressBar {
public:
    // Draws nothing unless `enabled`; the caller enables it only for a terminal, so that logs and
    // pipes never fill up with carriage returns.
    ProgressBar(bool enabled, int max_iters, std::size_t n);
    // Ends the line, so that an error thrown mid-run starts on a line of its own.
    ~ProgressBar();
    ProgressBar(const ProgressBar&) = delete;
    ProgressBar& operator=(const ProgressBar&) = delete;

    void update(const IterationRecord& record);
    // Ends the line if anything was drawn; later calls do nothing.
    void finish();

private:
    bool enabled_;
    bool drawn_ = false;
    int max_iters_;
    std::size_t n_;
    std::chrono::steady_clock::time_point start_;
};

// A long pass's line: how much of it is done (bytes or rows), the rates, and the time left at that
// rate. Passes that end within half a second draw nothing.
class PassLine {
public:
    // Draws nothing unless `enabled` (a terminal, as for ProgressBar); `what` names the pass.
    PassLine(bool enabled, std::string what);
    ~PassLine();
    PassLine(const PassLine&) = delete;
    PassLine& operator=(const PassLine&) = delete;

    // A read: bytes read of all, of status.rows rows.
    void bytes(const ReadStatus& status);
    // A pass over rows: `done` of `total`.
    void rows(std::size_t done, std::size_t total);
    void finish();

private:
    // Whether to draw now: enabled, past half a second, and a tenth of a second after the last line.
    bool due(std::chrono::steady_clock::time_point now) const;
    void draw(std::chrono::steady_clock::time_point now, const std::string& text);

    bool enabled_;
    bool drawn_ = false;
    std::string what_;
    std::chrono::steady_clock::time_point start_;
    std::chrono::steady_clock::time_point drawn_at_;
};

}  // namespace vlattice::cli
