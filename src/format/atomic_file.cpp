#include "vlattice/atomic_file.hpp"

#include "format/temporary_files.hpp"

#include "vlattice/types.hpp"

#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>

namespace vlattice {

namespace {

// The innermost group open on this thread, which commit() hands finished files to.
thread_local OutputGroup* open_group = nullptr;

void rename_into_place(const std::string& temporary, const std::string& path) {
    if (std::rename(temporary.c_str(), path.c_str()) != 0) {
        throw Error(path + ": cannot rename temporary file into place (" + std::strerror(errno) + ")");
    }
}

}  // namespace

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
    if (open_group) {
        open_group->adopt({path_, temporary_, signal_slot_});
        signal_slot_ = kNoTemporarySlot;
    } else {
        rename_into_place(temporary_, path_);
    }
    committed_ = true;
}

OutputGroup::OutputGroup() : enclosing_(open_group) {
    open_group = this;
}

OutputGroup::~OutputGroup() {
    for (const Finished& file : finished_) {
        std::remove(file.temporary.c_str());
        forget_temporary(file.signal_slot);
    }
    open_group = enclosing_;
}

void OutputGroup::adopt(Finished file) {
    finished_.push_back(std::move(file));
}

const std::string& OutputGroup::written(const std::string& path) const {
    for (const Finished& file : finished_) {
        if (file.path == path) {
            return file.temporary;
        }
    }
    throw Error(path + ": no finished output of that name in this group");
}

void OutputGroup::commit() {
    if (enclosing_) {
        for (Finished& file : finished_) {
            enclosing_->adopt(std::move(file));
        }
        finished_.clear();
        return;
    }
    for (const Finished& file : finished_) {
        check_output_path(file.path);
    }
    while (!finished_.empty()) {
        const Finished& file = finished_.front();
        rename_into_place(file.temporary, file.path);
        forget_temporary(file.signal_slot);
        finished_.erase(finished_.begin());
    }
}

std::vector<StaleTemporary> remove_stale_temporaries(const std::string& path) {
    namespace fs = std::filesystem;
    const fs::path folder = fs::path(path).parent_path().empty() ? fs::path(".") : fs::path(path).parent_path();
    std::vector<StaleTemporary> removed;
    std::error_code unreadable;
    for (fs::directory_iterator entry(folder, unreadable), end; !unreadable && entry != end;
         entry.increment(unreadable)) {
        const std::optional<pid_t> writer = temporary_writer(path, entry->path().filename().string());
        // kill(pid, 0) fails with ESRCH only when no such process exists; EPERM means it runs.
        if (!writer || ::kill(*writer, 0) == 0 || errno != ESRCH) {
            continue;
        }
        std::error_code failed;
        if (!fs::is_regular_file(entry->symlink_status(failed))) {
            continue;
        }
        const std::uintmax_t bytes = entry->file_size(failed);
        if (!failed && fs::remove(entry->path(), failed)) {
            removed.push_back({entry->path().string(), *writer, bytes});
        }
    }
    return removed;
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

}  // namespace vlattice
