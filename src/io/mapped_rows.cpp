#include "io/mapped_rows.hpp"

#include "format/temporary_files.hpp"
#include "io/binary_file.hpp"
#include "vlattice/types.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdio>
#include <cstring>
#include <mutex>

namespace vlattice::io {

namespace {

// What the SIGBUS handler knows of one mapping, in fixed storage so that it reads no memory an
// allocation could be moving.
struct Guard {
    std::atomic<bool> used{false};
    std::uintptr_t begin = 0;  // the mapping, page-aligned
    std::uintptr_t end = 0;
    std::uintptr_t rows = 0;  // the first row
    std::size_t row_bytes = 1;
    char message[PATH_MAX + 128] = {};  // "vlattice: error: PATH shrank ... row "
};
std::array<Guard, 16> guards;
std::mutex guarding;

void write_text(const char* text) {
    std::size_t left = std::strlen(text);
    while (left > 0) {
        const ssize_t wrote = ::write(STDERR_FILENO, text, left);
        if (wrote <= 0) {
            return;
        }
        text += wrote;
        left -= static_cast<std::size_t>(wrote);
    }
}

// Only async-signal-safe calls: write, unlink (through remove_registered_temporaries), _exit, signal.
extern "C" void on_bus_error(int signal_number, siginfo_t* info, void*) {
    const auto at = reinterpret_cast<std::uintptr_t>(info->si_addr);
    for (const Guard& guard : guards) {
        if (!guard.used.load() || at < guard.begin || at >= guard.end) {
            continue;
        }
        write_text(guard.message);
        char digits[24];
        char* cursor = digits + sizeof digits;
        *--cursor = '\0';
        std::uintptr_t row = at < guard.rows ? 0 : (at - guard.rows) / guard.row_bytes;
        do {
            *--cursor = static_cast<char>('0' + row % 10);
            row /= 10;
        } while (row > 0);
        write_text(cursor);
        write_text(" lies past its end now; no output is written\n");
        remove_registered_temporaries();
        ::_exit(1);
    }
    // Not a mapping of ours: the default action, when the faulting access runs again.
    ::signal(signal_number, SIG_DFL);
}

void install_handler() {
    struct sigaction current {};
    if (::sigaction(SIGBUS, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) {
        return;
    }
    struct sigaction handler {};
    handler.sa_sigaction = on_bus_error;
    sigemptyset(&handler.sa_mask);
    handler.sa_flags = SA_SIGINFO;
    ::sigaction(SIGBUS, &handler, nullptr);
}

std::size_t add_guard(const std::string& path, const void* base, std::size_t bytes, const void* rows,
                      std::size_t row_bytes) {
    static std::once_flag installed;
    std::call_once(installed, install_handler);
    const std::lock_guard<std::mutex> lock(guarding);
    for (std::size_t i = 0; i < guards.size(); ++i) {
        Guard& guard = guards[i];
        if (guard.used.load()) {
            continue;
        }
        guard.begin = reinterpret_cast<std::uintptr_t>(base);
        guard.end = guard.begin + bytes;
        guard.rows = reinterpret_cast<std::uintptr_t>(rows);
        guard.row_bytes = row_bytes;
        const std::string message =
            "vlattice: error: " + path.substr(0, PATH_MAX) + " shrank while its rows were read from it: row ";
        std::memcpy(guard.message, message.c_str(), message.size() + 1);
        guard.used.store(true);
        return i;
    }
    throw Error(path + ": more than " + std::to_string(guards.size()) + " files mapped at once");
}

// Resident pages backed by files (and shared memory) in this process: statm's third field.
std::size_t file_pages(int statm) {
    char text[256];
    const ssize_t got = statm < 0 ? -1 : ::pread(statm, text, sizeof text - 1, 0);
    if (got <= 0) {
        return 0;
    }
    text[got] = '\0';
    unsigned long long size = 0;
    unsigned long long resident = 0;
    unsigned long long shared = 0;
    return std::sscanf(text, "%llu %llu %llu", &size, &resident, &shared) == 3 ? static_cast<std::size_t>(shared) : 0;
}

}  // namespace

MappedRows::MappedRows(const std::string& path, std::uint64_t offset, std::size_t rows, std::size_t row_bytes,
                       std::size_t resident_limit)
    : path_(path), resident_limit_(resident_limit) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd_ < 0) {
        throw Error(path + ": cannot open (" + system_reason() + ")");
    }
    struct stat info {};
    const std::uint64_t need = offset + static_cast<std::uint64_t>(rows) * row_bytes;
    std::string reason;
    if (::fstat(fd_, &info) != 0) {
        reason = system_reason();
    } else if (!S_ISREG(info.st_mode)) {
        reason = "not a regular file";
    } else if (static_cast<std::uint64_t>(info.st_size) < need) {
        reason = "its " + std::to_string(info.st_size) + " bytes are fewer than the " + std::to_string(need) +
                 " its rows need";
    }
    if (!reason.empty()) {
        ::close(fd_);
        throw Error(path + ": cannot map its rows: " + reason);
    }
    const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGE_SIZE));
    const std::uint64_t start = offset / page * page;
    lead_ = static_cast<std::size_t>(offset - start);
    mapped_bytes_ = static_cast<std::size_t>(need - start);
    base_ = ::mmap(nullptr, mapped_bytes_, PROT_READ, MAP_SHARED, fd_, static_cast<off_t>(start));
    if (base_ == MAP_FAILED) {
        const std::string reason = system_reason();
        ::close(fd_);
        throw Error(path + ": cannot map its " + std::to_string(mapped_bytes_) + " bytes of rows (" + reason + ")");
    }
    try {
        guard_slot_ = add_guard(path, base_, mapped_bytes_, data(), row_bytes);
    } catch (...) {
        ::munmap(base_, mapped_bytes_);
        ::close(fd_);
        throw;
    }
    statm_ = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    other_file_pages_ = file_pages(statm_);
    look_every_ = std::max(kFaultWindow, resident_limit_ / 1024);
}

MappedRows::~MappedRows() {
    if (statm_ >= 0) {
        ::close(statm_);
    }
    guards[guard_slot_].used.store(false);
    ::munmap(base_, mapped_bytes_);
    ::close(fd_);
}

void MappedRows::note_read(const void* at, std::size_t bytes) const {
    // The window this thread read last, and whose mapping it was in.
    thread_local const MappedRows* last_mapping = nullptr;
    thread_local std::uintptr_t last_window = 0;
    const auto begin = reinterpret_cast<std::uintptr_t>(at);
    const std::uintptr_t first = begin / kFaultWindow;
    const std::uintptr_t last = (begin + std::max<std::size_t>(bytes, 1) - 1) / kFaultWindow;
    std::size_t windows = last - first + 1;
    if (last_mapping == this && last_window == first) {
        --windows;
    }
    last_mapping = this;
    last_window = last;
    if (windows == 0) {
        return;
    }
    const std::size_t covered = windows * kFaultWindow;
    if (counted_.fetch_add(covered, std::memory_order_relaxed) + covered >= look_every_) {
        look();
    }
}

void MappedRows::look() const {
    const std::lock_guard<std::mutex> lock(looking_);
    const std::size_t counted = counted_.load();
    if (counted < look_every_) {
        return;  // another thread looked meanwhile
    }
    counted_.store(0);
    if (statm_ < 0) {
        resident_ += counted;  // nothing to measure: the count alone
    } else {
        const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGE_SIZE));
        const std::size_t pages = file_pages(statm_);
        resident_ = (pages > other_file_pages_ ? pages - other_file_pages_ : 0) * page;
    }
    if (resident_ >= resident_limit_ / 2) {
        // A thread reading meanwhile only faults its pages in again.
        ::madvise(base_, mapped_bytes_, MADV_DONTNEED);
        resident_ = 0;
    }
}

}  // namespace vlattice::io
