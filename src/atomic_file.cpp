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

TemporaryOutput::TemporaryOutput(std::string path)
    : path_(std::move(path)), temporary_(temporary_name_for(path_)), signal_slot_(kNoTemporarySlot) {
    check_output_path(path_);
    signal_slot_ = register_temporary(temporary_);
}

TemporaryOutput::~TemporaryOutput() {
    if (!committed_) {
        std::remove(temporary_.c_str());
    }
    forget_temporary(signal_slot_);
}

void TemporaryOutput::commit() {
    if (std::rename(temporary_.c_str(), path_.c_str()) != 0) {
        throw Error(path_ + ": cannot rename temporary file into place (" + std::strerror(errno) + ")");
    }
    committed_ = true;
}

AtomicFile::AtomicFile(std::string path) : output_(std::move(path)) {
    out_.open(output_.temporary(), std::ios::binary | std::ios::trunc);
    if (!out_) {
        throw Error(output_.path() + ": cannot create output file (" + std::strerror(errno) + ")");
    }
}

void AtomicFile::commit() {
    out_.flush();
    if (!out_) {
        throw Error(output_.path() + ": write failed (disk full or I/O error)");
    }
    out_.close();
    if (out_.fail()) {
        throw Error(output_.path() + ": closing the output failed (disk full or I/O error)");
    }
    output_.commit();
}

const std::string& OutputGroup::add(std::string path) {
    outputs_.push_back(std::make_unique<TemporaryOutput>(std::move(path)));
    return outputs_.back()->temporary();
}

void OutputGroup::commit() {
    for (const std::unique_ptr<TemporaryOutput>& output : outputs_) {
        output->commit();
    }
}

}  // namespace vlattice
