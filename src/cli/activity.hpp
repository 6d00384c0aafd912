// What a command is doing at the moment ("reading --queries q.npy"), so that running out of memory
// can be reported with the step that needed it rather than as a bare "out of memory".
#pragma once

#include <string>
#include <utility>

namespace vlattice::cli {

// Names a step for as long as it lives.
class Activity {
public:
    explicit Activity(std::string what);
    ~Activity();
    Activity(const Activity&) = delete;
    Activity& operator=(const Activity&) = delete;

private:
    std::string previous_;
    int exceptions_;  // std::uncaught_exceptions() when the step began
};

// work() as the step `what`: const Matrix x = during("reading INPUT x.npy", [&] { return read(...); });
template <class Work>
auto during(std::string what, Work work) -> decltype(work()) {
    const Activity step(std::move(what));
    return work();
}

// The innermost step an exception left, once it has been caught: the step that failed ("" when the
// exception came from outside every step).
const std::string& failed_activity();

}  // namespace vlattice::cli
