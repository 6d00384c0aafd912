// Output files are written under a temporary name beside the target and renamed into place on
// commit(), so a crash or an error never leaves a half-written file under the real name and never
// touches an existing file there. The temporary file is removed on an error, and also when SIGINT,
// SIGTERM or SIGHUP stops the process; what a SIGKILL leaves, a later run on the same target finds
// (remove_stale_temporaries). A run with several outputs renames them together (OutputGroup).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace vlattice {

// Throws Error naming the path when it cannot name an output file: empty, an existing directory, or
// an existing device, pipe or socket (which the rename into place would replace).
// The writers call it before they create anything, so that the mistake shows before the work.
void check_output_path(const std::string& path);

// The temporary name that stands in for a target until commit(), for any writer: the target is
// checked (check_output_path), the temporary file is removed on a signal (src/format/temporary_files.hpp)
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
    // Renames the temporary file over the target, or, while an OutputGroup is open on this thread,
    // hands the finished file to the group; throws Error naming the path.
    void commit();

private:
    std::string path_;
    std::string temporary_;
    std::size_t signal_slot_;  // src/format/temporary_files.hpp
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

// The outputs of one run, renamed into place together, so that a run that fails after writing some
// of them (a report that does not fit on the disk after the .vlat did) leaves every earlier output as
// it was. While a group is open on a thread, every commit() there (TemporaryOutput, AtomicFile and
// so every writer) leaves its finished file under its temporary name and hands it to the group;
// the group's commit() renames them all. A group destroyed before its commit() removes them. A group
// opened inside another hands its files on to the enclosing one on commit().
class OutputGroup {
public:
    OutputGroup();
    ~OutputGroup();
    OutputGroup(const OutputGroup&) = delete;
    OutputGroup& operator=(const OutputGroup&) = delete;

    // Checks every target first (check_output_path: one that became a directory meanwhile fails
    // before anything is renamed), then renames each file into place; throws Error naming the path.
    // Only a rename that fails after the check (the folder removed meanwhile) can leave the targets
    // before it renamed and those after it not.
    void commit();

    struct Finished {
        std::string path;
        std::string temporary;
        std::size_t signal_slot;
    };
    // For TemporaryOutput::commit().
    void adopt(Finished file);
    // Where the finished, not yet renamed output for the target `path` lies, for a run that reads back
    // what it wrote (batch fingerprints its .vlat); throws Error when the group holds none.
    const std::string& written(const std::string& path) const;

private:
    std::vector<Finished> finished_;
    OutputGroup* enclosing_;
};

// A temporary file of an earlier run that a SIGKILL (or a crash) stopped before it could remove it.
struct StaleTemporary {
    std::string path;
    pid_t writer = 0;  // the process that wrote it, which no longer runs
    std::uintmax_t bytes = 0;
};

// Removes the temporary files of the target `path` (regular files under its temporary names, in its
// folder) whose writing process no longer runs, and returns what it removed. Files of a process that
// still runs are left alone, as is anything else; a folder that cannot be read gives nothing. A PID
// is checked in this process's PID namespace: a process in another container that writes into the
// same folder looks as if it no longer ran.
std::vector<StaleTemporary> remove_stale_temporaries(const std::string& path);

}  // namespace vlattice
