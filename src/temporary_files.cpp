#include "temporary_files.hpp"

#include <signal.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <climits>
#include <cstring>
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
    for (Slot& slot : slots) {
        if (slot.used.load()) {
            ::unlink(slot.path);
        }
    }
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

}  // namespace

std::string temporary_name_for(const std::string& path) {
    std::random_device entropy;
    return path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(entropy());
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

void forget_temporary(std::size_t slot) {
    if (slot < slots.size()) {
        slots[slot].used.store(false);
    }
}

}  // namespace vlattice
