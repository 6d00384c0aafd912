// The one-line progress display of a run: redrawn in place on stderr after every iteration.
#pragma once

#include "vlattice/anneal.hpp"

#include <chrono>
#include <cstddef>

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

}  // namespace vlattice::cli
