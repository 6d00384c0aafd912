// How much memory a run can have, checked before a large allocation so that a file or an option
// asking for more fails naming itself and the size, rather than as a bare "out of memory" (or a kill
// by the kernel once the pages are touched).
#pragma once

#include <cstdint>
#include <string>

namespace vlattice {

struct MemoryLimit {
    std::uint64_t bytes = 0;
    std::string source;  // "this machine's memory", "the address-space limit (ulimit -v)" ...
};

// The smallest of the physical memory, the cgroup's memory.max and the address-space limit.
MemoryLimit memory_limit();

// "32.8 GB (32,768,000,000 bytes)".
std::string byte_size_text(std::uint64_t bytes);

// A count with thousands separators: 2,000,000.
std::string count_text(std::uint64_t count);

// Throws Error "<what> needs <size>, more than <limit>" when `bytes` (UINT64_MAX: past 2^64) is
// above memory_limit(). `what` names the file and shape or the option ("x.h5: dataset 'train':
// 2,000,000 x 4,096 float32").
void check_memory(const std::string& what, std::uint64_t bytes);

// rows * cols * element_bytes, or UINT64_MAX when that does not fit 64 bits.
std::uint64_t table_bytes(std::uint64_t rows, std::uint64_t cols, std::uint64_t element_bytes);

}  // namespace vlattice
