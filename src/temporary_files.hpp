// Temporary output files to remove when SIGINT, SIGTERM or SIGHUP stops the process before their
// writer renames or removes them: destructors do not run then, and an interrupted run would leave
// NAME.tmp.* files beside its outputs. The first registration installs the handlers, for those of
// the three signals that still have their default action (a caller's own handling, or nohup's
// ignored SIGHUP, stays as it is); the handler removes every file registered at that moment, then
// lets the signal end the process as it would have.
#pragma once

#include <cstddef>
#include <string>

namespace vlattice {

// PATH.tmp.PID.RANDOM: beside the target, so that the rename into place stays on one file system,
// and unique to this writer even where two processes write the same target.
std::string temporary_name_for(const std::string& path);

// A slot to pass to forget_temporary, or kNoTemporarySlot when all slots are taken (that file is
// then not removed on a signal; 64 are open at once at the most, far more than any command uses).
std::size_t register_temporary(const std::string& path);
inline constexpr std::size_t kNoTemporarySlot = static_cast<std::size_t>(-1);

// The file was renamed into place or removed: a signal no longer removes it.
void forget_temporary(std::size_t slot);

}  // namespace vlattice
