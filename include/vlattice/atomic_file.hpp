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

// The temporary name that stands in for a target until commit(), for any writer: the target is
// checked (check_output_path), the temporary file is removed on a signal (src/temporary_files.hpp)
// and on destruction unless commit() renamed it into place. The writer creates the file under
// temporary() and closes it before commit() and before its own destruction ends.
class TemporaryOutput {
public:
    explicit TemporaryOutput(std::string path);
    ~TemporaryOutput();
    TemporaryOutput(const TemporaryOutput&) = delete;
    TemporaryOutput& operator=(const TemporaryOutput&) = delete;

    const std::string& path() const { return path_; }
    const std::string& temporary() const { return temporary_; }
    // Renames the temporary file over the target; throws Error naming the path.
    void commit();

private:
    std::string path_;
    std::string temporary_;
    std::size_t signal_slot_;  // src/temporary_files.hpp
    bool committed_ = false;
};

class AtomicFile {
public:
    // Throws Error naming the path when it cannot be an output or the file cannot be created.
    explicit AtomicFile(std::string path);

    std::ofstream& stream() { return out_; }
    // Flushes, checks the stream, and renames over the target; throws Error naming the path.
    void commit();

private:
    TemporaryOutput output_;
    std::ofstream out_;  // after output_, so that it is closed before output_ removes the file
};

}  // namespace vlattice
