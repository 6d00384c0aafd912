#include "format/temporary_files.hpp"

#include <signal.h>
#include <unistd.h>

#include <xxhash.h>

#include <array>
#include <atomic>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <random>

namespace vlattice {

namespace {

// Fixed storage, so that the handler reads no memory that an allocation could be moving.
struct Slot {
    std::atomic<bool> used{false};
    char path[PATH_MAX] = {};
};
std::array<Slot, 64> slots;
std::mutex registering;
static_assert(std::atomic<bool>::is_always_lock_free, "the signal handler reads the flags");

// Only async-signal-safe calls: unlink, then raise with the default action back in place
// (SA_RESETHAND) and the signal not blocked inside its own handler (SA_NODEFER).
extern "C" void remove_temporaries(int signal_number) {
    remove_registered_temporaries();
    ::raise(signal_number);
}

void install_handlers() {
    for (const int signal_number : {SIGINT, SIGTERM, SIGHUP}) {
        struct sigaction current {};
        if (::sigaction(signal_number, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) {
            continue;
        }
        struct sigaction handler {};
        handler.sa_handler = remove_temporaries;
        sigemptyset(&handler.sa_mask);
        handler.sa_flags = SA_RESETHAND | SA_NODEFER;
        ::sigaction(signal_number, &handler, nullptr);
    }
}

// Up to 10 digits each for the PID and the random part (both are 32-bit), and the dots around them.
constexpr std::size_t kTag = sizeof(".tmp.") - 1;
constexpr std::size_t kStemMax = NAME_MAX - (1 + kTag + 10 + 1 + 10);
constexpr std::size_t kHashDigits = 16;

// NAME itself when shorter than kStemMax; else cut, with ~ and the hash, exactly kStemMax long, so
// that a cut name never reads as a whole one.
std::string stem_of(const std::string& name) {
    if (name.size() < kStemMax) {
        return name;
    }
    char hash[kHashDigits + 1];
    std::snprintf(hash, sizeof hash, "%016" PRIx64, static_cast<std::uint64_t>(XXH3_64bits(name.data(), name.size())));
    return name.substr(0, kStemMax - kHashDigits - 1) + "~" + hash;
}

// The PID in "PID.RANDOM", two runs of at most 10 digits.
std::optional<pid_t> parse_writer(const std::string& rest) {
    const std::size_t dot = rest.find('.');
    const auto digits = [](const std::string& text) {
        return !text.empty() && text.size() <= 10 && text.find_first_not_of("0123456789") == std::string::npos;
    };
    if (dot == std::string::npos || !digits(rest.substr(0, dot)) || !digits(rest.substr(dot + 1))) {
        return std::nullopt;
    }
    const unsigned long long pid = std::stoull(rest.substr(0, dot));
    if (pid > static_cast<unsigned long long>(INT_MAX)) {
        return std::nullopt;
    }
    return static_cast<pid_t>(pid);
}

}  // namespace

std::string temporary_name_for(const std::string& path) {
    const std::filesystem::path target(path);
    std::random_device entropy;
    const std::string name = "." + stem_of(target.filename().string()) + ".tmp." + std::to_string(::getpid()) + "." +
                             std::to_string(entropy());
    return (target.parent_path() / name).string();
}

std::optional<pid_t> temporary_writer(const std::string& path, const std::string& file_name) {
    const std::string name = std::filesystem::path(path).filename().string();
    for (const std::string& prefix : {"." + stem_of(name) + ".tmp.", name + ".tmp."}) {
        if (file_name.size() > prefix.size() && file_name.compare(0, prefix.size(), prefix) == 0) {
            return parse_writer(file_name.substr(prefix.size()));
        }
    }
    return std::nullopt;
}

std::size_t register_temporary(const std::string& path) {
    static std::once_flag installed;
    std::call_once(installed, install_handlers);
    if (path.size() >= PATH_MAX) {
        return kNoTemporarySlot;
    }
    const std::lock_guard<std::mutex> lock(registering);
    for (std::size_t i = 0; i < slots.size(); ++i) {
        if (!slots[i].used.load()) {
            std::memcpy(slots[i].path, path.c_str(), path.size() + 1);
            slots[i].used.store(true);
            return i;
        }
    }
    return kNoTemporarySlot;
}

void remove_registered_temporaries() {
    for (Slot& slot : slots) {
        if (slot.used.load()) {
            ::unlink(slot.path);
        }
    }
}

void forget_temporary(std::size_t slot) {
    if (slot < slots.size()) {
        slots[slot].used.store(false);
    }
}

}  // namespace vlattice
