// A file's rows read in place through a read-only memory mapping, for a set larger than the memory
// it may hold (--memory). The whole array is mapped, but only a bounded share of it stays resident
// in the process: each read through a PointView reports the bytes it reads (note_read), and once
// reads have covered `resident_limit` bytes since the last time, every page of the mapping is given
// back (MADV_DONTNEED). A page read after that comes back from the page cache, or from the disk
// where the kernel has dropped it from there, so the process holds about resident_limit of the rows,
// plus what its threads read at once, whatever the file's size.
//
// Counted reads say when to look, not how much is resident: a fault maps the pages of the page
// cache around it too (Linux's fault-around, 64 KiB windows by default, and the whole of each large
// folio it touches, up to 2 MiB). So reads are counted in whole kFaultWindow windows (a thread's
// reads within the window it read last count once, so a pass in row order counts each window
// once), and every 1/1024 of the limit counted (at least every window) the mapping's residency is
// measured: the process's resident file pages (/proc/self/statm) beyond those it had before the
// mapping. At half the limit the pages are given back, which leaves the other half for what the
// threads map before the next look.
//
// A file that shrinks under the mapping makes a read past its new end raise SIGBUS. The first
// mapping installs a handler that ends the process there with an error naming the file and the row,
// after removing the registered temporary outputs (as SIGINT does), so that no output is left; a
// SIGBUS at any other address keeps its default action.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

namespace vlattice::io {

class MappedRows {
public:
    static constexpr std::size_t kFaultWindow = std::size_t{1} << 16;

    // Rows [0, rows) of `row_bytes` each, the first at byte `offset` of the file at `path`; throws
    // Error naming the file when it cannot be opened or mapped, or is shorter than they need.
    MappedRows(const std::string& path, std::uint64_t offset, std::size_t rows, std::size_t row_bytes,
               std::size_t resident_limit);
    ~MappedRows();
    MappedRows(const MappedRows&) = delete;
    MappedRows& operator=(const MappedRows&) = delete;

    const void* data() const { return static_cast<const char*>(base_) + lead_; }
    const std::string& path() const { return path_; }
    std::size_t resident_limit() const { return resident_limit_; }

    // The `bytes` from `at` (inside the rows) about to be read, from any thread; may give every page
    // back first.
    void note_read(const void* at, std::size_t bytes) const;

private:
    std::string path_;
    int fd_ = -1;
    void* base_ = nullptr;
    std::size_t mapped_bytes_ = 0;
    std::size_t lead_ = 0;  // from the page boundary the mapping starts at to the first row
    std::size_t resident_limit_ = 0;
    std::size_t guard_slot_ = 0;
    int statm_ = -1;                    // /proc/self/statm, -1 where it cannot be read
    std::size_t other_file_pages_ = 0;  // file pages the process had mapped before this mapping
    std::size_t look_every_ = 0;                   // counted bytes between looks
    mutable std::atomic<std::size_t> counted_{0};  // read bytes counted since the last look
    mutable std::size_t resident_ = 0;             // what the last look found, under looking_
    mutable std::mutex looking_;

    void look() const;
};

}  // namespace vlattice::io
