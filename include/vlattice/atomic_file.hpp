// Output files are written under a temporary name beside the target and renamed into place on
// commit(), so a crash or an error never leaves a half-written file under the real name and never
// touches an existing file there. The temporary file is removed on an error, and also when SIGINT,
// SIGTERM or SIGHUP stops the process.
#pragma once

#include <cstddef>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

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

// Several outputs of one run that must appear together or not at all: each is written under the
// temporary name add() returns (by any writer; one that writes through its own AtomicFile renames
// its temporary onto that name), and commit() renames them all into place once every one has been
// written. Until then no target is touched; without commit() every temporary file is removed.
// Renames cannot be undone as one: when one fails, the outputs renamed before it stay in place, so
// a reader that needs the set whole checks that its members belong together.
class OutputGroup {
public:
    // Checks the target (check_output_path); returns the path to write it under.
    const std::string& add(std::string path);
    // Renames every output into place, in the order added; throws Error naming the path.
    void commit();

private:
    std::vector<std::unique_ptr<TemporaryOutput>> outputs_;
};

}  // namespace vlattice
