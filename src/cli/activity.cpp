#include "activity.hpp"

#include <exception>
#include <utility>

namespace vlattice::cli {

namespace {

std::string& current() {
    static std::string what;
    return what;
}

std::string& failed() {
    static std::string what;
    return what;
}

}  // namespace

Activity::Activity(std::string what)
    : previous_(std::exchange(current(), std::move(what))), exceptions_(std::uncaught_exceptions()) {
    // A step that begins means any earlier failure was handled (a batch job that failed, say).
    failed().clear();
}

Activity::~Activity() {
    // Unwinding runs the innermost step's destructor first: that is the step to name.
    if (std::uncaught_exceptions() > exceptions_ && failed().empty()) {
        failed() = current();
    }
    current() = std::move(previous_);
}

const std::string& failed_activity() {
    return failed();
}

}  // namespace vlattice::cli
