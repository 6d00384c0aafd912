// The note saying where a run executes when --device auto could not take the GPU ("no usable GPU:
// ...; running on the CPU"). It belongs to a run that has started, so commands print it only once
// their inputs have been read, and at most once per process (batch runs many jobs).
#pragma once

#include <string>

namespace vlattice::cli {

// Prints `note` as `command`'s note on stderr unless it is empty, `quiet` is set, or a note was
// printed before in this process.
void print_device_note(const std::string& command, const std::string& note, bool quiet);

}  // namespace vlattice::cli
