// Limits that the environment may lower, so that tests on a large GPU meet what a smaller one does.
#pragma once

#include "runtime/cuda_check.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <string>

namespace vlattice::cuda {

// `limit`, or the whole number of bytes the environment variable `name` holds where that is less.
// Throws Error for a value that is not a whole number of bytes.
inline std::size_t environment_cap(const char* name, std::size_t limit) {
    const char* cap = std::getenv(name);
    if (cap == nullptr || *cap == '\0') {
        return limit;
    }
    char* end = nullptr;
    const unsigned long long value = std::strtoull(cap, &end, 10);
    if (*end != '\0' || *cap == '-') {
        throw Error(std::string(name) + ": expected a number of bytes, got '" + cap + "'");
    }
    return std::min<std::size_t>(limit, static_cast<std::size_t>(value));
}

}  // namespace vlattice::cuda
