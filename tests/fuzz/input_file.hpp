// The fuzz targets' way of handing bytes to vlattice's readers, which take paths: a file of this
// process's own, written for one input and removed after it.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

namespace vlattice::fuzz {

class InputFile {
public:
    InputFile(const std::uint8_t* data, std::size_t size, const std::string& extension)
        : path_("/tmp/vlattice-fuzz-" + std::to_string(getpid()) + extension) {
        std::ofstream out(path_, std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    }
    ~InputFile() { std::remove(path_.c_str()); }
    InputFile(const InputFile&) = delete;
    InputFile& operator=(const InputFile&) = delete;

    const std::string& path() const { return path_; }

private:
    std::string path_;
};

}  // namespace vlattice::fuzz
