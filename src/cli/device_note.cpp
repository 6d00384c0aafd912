#include "device_note.hpp"

#include "options.hpp"

namespace vlattice::cli {

void print_device_note(const std::string& command, const std::string& note, bool quiet) {
    static bool printed = false;
    if (note.empty() || quiet || printed) {
        return;
    }
    printed = true;
    print_notice(command, "note", note);
}

}  // namespace vlattice::cli
