#include "vlattice/memory.hpp"

#include "vlattice/types.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>

namespace vlattice {

namespace {

constexpr std::uint64_t kUnlimited = std::numeric_limits<std::uint64_t>::max();

// cgroup v2's limit for the container the process runs in ("max" when there is none).
std::uint64_t cgroup_limit() {
    std::ifstream in("/sys/fs/cgroup/memory.max");
    std::uint64_t bytes = 0;
    return in >> bytes ? bytes : kUnlimited;
}

std::string scaled_text(std::uint64_t bytes) {
    char scaled[32];
    const bool gigabytes = bytes >= 1000000000;
    std::snprintf(scaled, sizeof scaled, "%.1f %s", static_cast<double>(bytes) / (gigabytes ? 1e9 : 1e6),
                  gigabytes ? "GB" : "MB");
    return scaled;
}

}  // namespace

MemoryLimit memory_limit() {
    const long pages = ::sysconf(_SC_PHYS_PAGES);
    const long page_bytes = ::sysconf(_SC_PAGE_SIZE);
    MemoryLimit limit{kUnlimited, "this machine's memory"};
    if (pages > 0 && page_bytes > 0) {
        limit.bytes = static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page_bytes);
    }
    if (const std::uint64_t cgroup = cgroup_limit(); cgroup < limit.bytes) {
        limit = {cgroup, "the memory limit of this process's control group"};
    }
    rlimit address_space{};
    if (::getrlimit(RLIMIT_AS, &address_space) == 0 && address_space.rlim_cur != RLIM_INFINITY &&
        address_space.rlim_cur < limit.bytes) {
        limit = {address_space.rlim_cur, "the address-space limit (ulimit -v)"};
    }
    return limit;
}

std::string count_text(std::uint64_t count) {
    std::string digits = std::to_string(count);
    for (std::size_t at = digits.size(); at > 3; at -= 3) {
        digits.insert(at - 3, ",");
    }
    return digits;
}

std::string byte_size_text(std::uint64_t bytes) {
    if (bytes == kUnlimited) {
        return "more than 2^64 bytes";
    }
    return scaled_text(bytes) + " (" + count_text(bytes) + " bytes)";
}

std::uint64_t table_bytes(std::uint64_t rows, std::uint64_t cols, std::uint64_t element_bytes) {
    std::uint64_t cells = 0;
    std::uint64_t bytes = 0;
    if (__builtin_mul_overflow(rows, cols, &cells) || __builtin_mul_overflow(cells, element_bytes, &bytes)) {
        return kUnlimited;
    }
    return bytes;
}

void check_memory(const std::string& what, std::uint64_t bytes) {
    const MemoryLimit limit = memory_limit();
    if (bytes > limit.bytes) {
        throw Error(what + " needs " + byte_size_text(bytes) + " of memory, more than " + limit.source + " allows (" +
                    scaled_text(limit.bytes) + ")");
    }
}

}  // namespace vlattice
