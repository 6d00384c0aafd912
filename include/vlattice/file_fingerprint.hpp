// What a file held when it was read, so that a later run can tell whether it still holds the same
// bytes (vlattice batch skips a finished job only then): its size and a hash of its contents.
#pragma once

#include <cstdint>
#include <string>

namespace vlattice {

struct FileFingerprint {
    std::uint64_t bytes = 0;
    std::uint64_t xxh3 = 0;  // XXH3_64bits of the whole file, seed 0

    bool operator==(const FileFingerprint& other) const { return bytes == other.bytes && xxh3 == other.xxh3; }
    bool operator!=(const FileFingerprint& other) const { return !(*this == other); }
};

// Reads the whole file; throws Error naming it when it is not a regular, non-empty file or a read
// fails. The contents are hashed rather than the modification time trusted, because a copy or a
// restore changes the time of the same bytes, and an edit within the clock's resolution keeps it.
FileFingerprint file_fingerprint(const std::string& path);

}  // namespace vlattice
