// standard_input_file (include/vlattice/io.hpp).
#include "vlattice/io.hpp"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace vlattice {

namespace {

[[noreturn]] void fail(const std::string& what) {
    throw Error("standard input: " + what + " (" + std::strerror(errno) + ")");
}

}  // namespace

std::string standard_input_file(const std::string& format) {
    // Every reader checks sizes against the file's length before it allocates, and seeks: a pipe
    // has neither, so its bytes are gathered first, in a file that lives in memory.
    const std::string path = "/dev/stdin";
    struct stat status {};
    if (::fstat(STDIN_FILENO, &status) != 0) {
        fail("cannot read it");
    }
    if (S_ISREG(status.st_mode)) {
        return path;
    }
    if (::isatty(STDIN_FILENO)) {
        throw Error("standard input is a terminal; pipe the vectors in, or name their file");
    }
    if (is_hdf5_path("stdin." + format)) {
        throw Error("standard input: HDF5 is read from a file, not from a pipe; redirect the file (< FILE.h5) "
                    "or name it");
    }
    const int memory = ::memfd_create("vlattice-stdin", MFD_CLOEXEC);
    if (memory < 0) {
        fail("cannot make a file in memory to hold it");
    }
    std::vector<char> buffer(std::size_t{1} << 20);
    for (;;) {
        const ssize_t got = ::read(STDIN_FILENO, buffer.data(), buffer.size());
        if (got < 0 && errno == EINTR) {
            continue;
        }
        if (got < 0) {
            ::close(memory);
            fail("read error");
        }
        if (got == 0) {
            break;
        }
        for (ssize_t done = 0; done < got;) {
            const ssize_t put = ::write(memory, buffer.data() + done, static_cast<std::size_t>(got - done));
            if (put < 0 && errno == EINTR) {
                continue;
            }
            if (put < 0) {
                ::close(memory);
                fail("cannot hold it in memory");
            }
            done += put;
        }
    }
    // In place of the pipe, /dev/stdin (/proc/self/fd/0) opens the file in memory, from its start.
    if (::dup2(memory, STDIN_FILENO) < 0) {
        ::close(memory);
        fail("cannot put the file in memory in its place");
    }
    ::close(memory);
    return path;
}

}  // namespace vlattice
