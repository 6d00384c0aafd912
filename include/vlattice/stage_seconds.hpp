// Seconds per named stage of a step made of several (training the residual code, coding the
// vectors), for the run report.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace vlattice {

class StageSeconds {
public:
    // Adds `seconds` to `stage`; stages keep the order in which each first ran.
    void add(const std::string& stage, double seconds) {
        for (auto& entry : entries_) {
            if (entry.first == stage) {
                entry.second += seconds;
                return;
            }
        }
        entries_.emplace_back(stage, seconds);
    }

    // Runs work() and adds its seconds to `stage`, also when it throws.
    template <class Work>
    decltype(auto) time(const std::string& stage, Work&& work) {
        const Timer timer(*this, stage);
        return work();
    }

    const std::vector<std::pair<std::string, double>>& entries() const { return entries_; }

private:
    class Timer {
    public:
        Timer(StageSeconds& owner, const std::string& stage)
            : owner_(owner), stage_(stage), start_(std::chrono::steady_clock::now()) {}
        ~Timer() { owner_.add(stage_, std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count()); }
        Timer(const Timer&) = delete;
        Timer& operator=(const Timer&) = delete;

    private:
        StageSeconds& owner_;
        const std::string& stage_;
        std::chrono::steady_clock::time_point start_;
    };

    std::vector<std::pair<std::string, double>> entries_;
};

// time() on a clock that may be absent: without one, work() just runs.
template <class Work>
decltype(auto) timed(StageSeconds* clock, const std::string& stage, Work&& work) {
    if (clock == nullptr) {
        return work();
    }
    return clock->time(stage, std::forward<Work>(work));
}

}  // namespace vlattice
