#include "folder_lock.hpp"

#include "vlattice/types.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cctype>
#include <cstring>
#include <filesystem>

namespace vlattice::cli {

namespace {

// The holder's pid as it wrote it, or "unknown" while it has locked but not yet written.
std::string holder_of(int fd) {
    char text[32] = {};
    const ssize_t got = ::pread(fd, text, sizeof(text) - 1, 0);
    std::string pid;
    for (ssize_t i = 0; i < got && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
        pid += text[i];
    }
    return pid.empty() ? "unknown" : pid;
}

}  // namespace

FolderLock::FolderLock(const std::string& folder, const std::string& lock_name) {
    const std::string path = (std::filesystem::path(folder) / lock_name).string();
    // No O_TRUNC: the file may be another process's lock, whose pid it holds. O_NONBLOCK: a FIFO put
    // in its place must not hang the open.
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
    if (fd_ < 0) {
        throw Error(path + ": cannot open the output folder's lock file (" + std::strerror(errno) + ")");
    }
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
        const int reason = errno;
        const std::string holder = holder_of(fd_);
        ::close(fd_);
        if (reason == EWOULDBLOCK) {
            throw Error(folder + ": another vlattice batch (process " + holder +
                        ") is writing to this output folder; wait for it to end, or give another -o");
        }
        throw Error(path + ": cannot lock the output folder (" + std::strerror(reason) + ")");
    }
    const std::string pid = std::to_string(::getpid()) + "\n";
    if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
        const std::string reason = std::strerror(errno);
        ::close(fd_);
        throw Error(path + ": cannot write the output folder's lock file (" + reason + ")");
    }
}

FolderLock::~FolderLock() {
    ::close(fd_);
}

}  // namespace vlattice::cli
