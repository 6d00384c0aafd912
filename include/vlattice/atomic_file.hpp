// Output files are written under a temporary name beside the target and renamed into place on
// commit(), so a crash or an error never leaves a half-written file under the real name and never
// touches an existing file there. The temporary file is removed on an error, and also when SIGINT,
// SIGTERM or SIGHUP stops the process.
#pragma once

#include <cstddef>
#include <fstream>
#include <string>

namespace vlattice {

// Throws Error naming the path when it cannot name an output file: empty, an existing directory, or
// an existing device, pipe or socket (which the rename into place would replace).
// The writers call it before they create anything, so that the mistake shows before the work.
void check_output_path(const std::string& path);

class AtomicFile {
public:
    explicit AtomicFile(std::string path);
    ~AtomicFile();  // removes the temporary file unless commit() succeeded
    AtomicFile(const AtomicFile&) = delete;
    AtomicFile& operator=(const AtomicFile&) = delete;

    std::ofstream& stream() { return out_; }
    // Flushes, checks the stream, and renames over the target; throws Error naming the path.
    void commit();

private:
    std::string path_;
    std::string temp_path_;
    std::ofstream out_;
    std::size_t signal_slot_;  // src/temporary_files.hpp
    bool committed_ = false;
};

}  // namespace vlattice
