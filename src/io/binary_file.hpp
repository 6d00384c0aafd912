// Read access to a vector file, shared by every binary reader so that "cannot open", "empty file"
// and "truncated" read the same whichever format the user passed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace vlattice::io {

// The binary formats are little-endian on disk and are read by copying bytes into place.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "vlattice's readers assume a little-endian host");

// strerror(errno): why the last failed system call failed, for an Error's parentheses.
std::string system_reason();

// Size in bytes of a regular, non-empty file; Error naming the file otherwise.
std::uint64_t nonempty_file_size(const std::string& path);

// False when nothing is at `path`, true for a regular file, an Error naming it for anything else (a
// named pipe, a device, a folder): for files a library opens on its own, which would wait forever
// on a named pipe.
bool regular_file_exists(const std::string& path);

// a * b, or an Error naming the file when the product does not fit in 64 bits (only a corrupt
// header can ask for that much).
std::uint64_t checked_multiply(const std::string& path, std::uint64_t a, std::uint64_t b);

// A shape as numpy and h5py print it: (60000, 784), or (10,) for one dimension.
std::string shape_text(const std::vector<std::uint64_t>& shape);

class BinaryFile {
public:
    explicit BinaryFile(const std::string& path);
    ~BinaryFile();
    BinaryFile(const BinaryFile&) = delete;
    BinaryFile& operator=(const BinaryFile&) = delete;

    const std::string& path() const { return path_; }
    std::uint64_t size() const { return size_; }
    std::uint64_t position() const { return position_; }

    // Reads exactly `bytes` at the current position; `what` names the content for the Error a short
    // file gets ("header", "row 7").
    void read(void* destination, std::size_t bytes, const std::string& what);
    // Moves the current position `bytes` on, past data read with read_at.
    void skip(std::uint64_t bytes) { position_ += bytes; }
    // Reads exactly `bytes` at `offset` without moving the current position; safe to call from
    // several threads at once (pread).
    void read_at(std::uint64_t offset, void* destination, std::size_t bytes, const std::string& what) const;

private:
    std::string path_;
    int fd_ = -1;
    std::uint64_t size_ = 0;
    std::uint64_t position_ = 0;
};

}  // namespace vlattice::io
