#include "io/binary_file.hpp"

#include "vlattice/types.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace vlattice::io {

std::string system_reason() {
    return std::strerror(errno);
}

namespace {

void require_regular(const std::string& path, const struct stat& info) {
    if (!S_ISREG(info.st_mode)) {
        throw Error(path + ": not a regular file");
    }
}

std::uint64_t regular_file_size(const std::string& path, const struct stat& info) {
    require_regular(path, info);
    if (info.st_size == 0) {
        throw Error(path + ": empty file");
    }
    return static_cast<std::uint64_t>(info.st_size);
}

}  // namespace

std::uint64_t nonempty_file_size(const std::string& path) {
    struct stat info {};
    if (::stat(path.c_str(), &info) != 0) {
        throw Error(path + ": cannot open (" + system_reason() + ")");
    }
    return regular_file_size(path, info);
}

bool regular_file_exists(const std::string& path) {
    struct stat info {};
    if (::stat(path.c_str(), &info) != 0) {
        return false;
    }
    require_regular(path, info);
    return true;
}

std::string shape_text(const std::vector<std::uint64_t>& shape) {
    std::string text = "(";
    for (std::size_t i = 0; i < shape.size(); ++i) {
        text += (i == 0 ? "" : ", ") + std::to_string(shape[i]);
    }
    return text + (shape.size() == 1 ? ",)" : ")");
}

std::uint64_t checked_multiply(const std::string& path, std::uint64_t a, std::uint64_t b) {
    std::uint64_t product = 0;
    if (__builtin_mul_overflow(a, b, &product)) {
        throw Error(path + ": the header's sizes multiply past 2^64 bytes (" + std::to_string(a) + " x " +
                    std::to_string(b) + "); the header is corrupt");
    }
    return product;
}

BinaryFile::BinaryFile(const std::string& path) : path_(path) {
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer; opened at once, it
    // is refused below as not a regular file. Regular files ignore the flag.
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd_ < 0) {
        throw Error(path + ": cannot open (" + system_reason() + ")");
    }
    struct stat info {};
    if (::fstat(fd_, &info) != 0) {
        const std::string reason = system_reason();
        ::close(fd_);
        throw Error(path + ": cannot open (" + reason + ")");
    }
    try {
        size_ = regular_file_size(path, info);
    } catch (...) {
        ::close(fd_);
        throw;
    }
}

BinaryFile::~BinaryFile() {
    ::close(fd_);
}

void BinaryFile::read(void* destination, std::size_t bytes, const std::string& what) {
    read_at(position_, destination, bytes, what);
    position_ += bytes;
}

void BinaryFile::read_at(std::uint64_t offset, void* destination, std::size_t bytes, const std::string& what) const {
    auto* out = static_cast<char*>(destination);
    std::size_t done = 0;
    // pread returns less than asked for reads above 2 GiB and on signals, so loop until done.
    while (done < bytes) {
        const ssize_t got = ::pread(fd_, out + done, bytes - done, static_cast<off_t>(offset + done));
        if (got < 0 && errno == EINTR) {
            continue;
        }
        if (got < 0) {
            throw Error(path_ + ": read error in " + what + " (" + system_reason() + ")");
        }
        if (got == 0) {
            throw Error(path_ + ": truncated: expected " + std::to_string(bytes) + " bytes of " + what +
                        " at offset " + std::to_string(offset) + ", the file ends after " +
                        std::to_string(offset + done) + " bytes");
        }
        done += static_cast<std::size_t>(got);
    }
}

}  // namespace vlattice::io
