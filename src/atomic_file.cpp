#include "vlattice/atomic_file.hpp"

#include "temporary_files.hpp"

#include "vlattice/types.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace vlattice {

void check_output_path(const std::string& path) {
    if (path.empty()) {
        throw Error("the output path is empty");
    }
    std::error_code unknown;
    const std::filesystem::file_status status = std::filesystem::status(path, unknown);
    if (std::filesystem::is_directory(status)) {
        throw Error(path + ": is a directory; name a file to write");
    }
    // The rename would put a regular file in place of a device, pipe or socket.
    if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
        throw Error(path + ": is not a regular file (a device, pipe or socket); name a file to write");
    }
}

AtomicFile::AtomicFile(std::string path)
    : path_(std::move(path)), temp_path_(temporary_name_for(path_)), signal_slot_(kNoTemporarySlot) {
    check_output_path(path_);
    signal_slot_ = register_temporary(temp_path_);
    out_.open(temp_path_, std::ios::binary | std::ios::trunc);
    if (!out_) {
        forget_temporary(signal_slot_);
        throw Error(path_ + ": cannot create output file (" + std::strerror(errno) + ")");
    }
}

AtomicFile::~AtomicFile() {
    if (!committed_) {
        out_.close();
        std::remove(temp_path_.c_str());
        forget_temporary(signal_slot_);
    }
}

void AtomicFile::commit() {
    out_.flush();
    if (!out_) {
        throw Error(path_ + ": write failed (disk full or I/O error)");
    }
    out_.close();
    if (out_.fail()) {
        throw Error(path_ + ": closing the output failed (disk full or I/O error)");
    }
    if (std::rename(temp_path_.c_str(), path_.c_str()) != 0) {
        throw Error(path_ + ": cannot rename temporary file into place (" + std::strerror(errno) + ")");
    }
    forget_temporary(signal_slot_);
    committed_ = true;
}

}  // namespace vlattice
