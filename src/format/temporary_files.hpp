// Temporary output files: their names, and their removal when SIGINT, SIGTERM or SIGHUP stops the
// process before their writer renames or removes them (destructors do not run then, and an
// interrupted run would leave them beside its outputs). The first registration installs the
// handlers, for those of the three signals that still have their default action (a caller's own
// handling, or nohup's ignored SIGHUP, stays as it is); the handler removes every file registered
// at that moment, then lets the signal end the process as it would have.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>

namespace vlattice {

// .NAME.tmp.PID.RANDOM for the target DIR/NAME: in the target's folder, so that the rename into place
// stays on one file system; hidden; unique to this writer even where two processes write the same
// target; and naming the process that writes it, so that a later run can tell the file of a writer
// that was killed (temporary_writer). Where NAME is too long for all that to fit in a file name
// (NAME_MAX, 255 bytes), it is cut and ends in ~ and a hash of the whole of NAME.
std::string temporary_name_for(const std::string& path);

// The process that wrote `file_name` (a name in the target's folder) when it is a temporary name of
// `path`, in the form above or in the NAME.tmp.PID.RANDOM form of earlier versions; else nullopt.
std::optional<pid_t> temporary_writer(const std::string& path, const std::string& file_name);

// A slot to pass to forget_temporary, or kNoTemporarySlot when all slots are taken (that file is
// then not removed on a signal; 64 are open at once at the most, far more than any command uses).
std::size_t register_temporary(const std::string& path);
inline constexpr std::size_t kNoTemporarySlot = static_cast<std::size_t>(-1);

// The file was renamed into place or removed: a signal no longer removes it.
void forget_temporary(std::size_t slot);

// Removes every file registered at this moment; async-signal-safe, for the handlers that end the
// process (these, and the SIGBUS of a file that shrinks under its mapping: src/io/mapped_rows.hpp).
void remove_registered_temporaries();

}  // namespace vlattice
