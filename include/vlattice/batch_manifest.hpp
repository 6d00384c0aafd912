// The manifest `vlattice batch --manifest` reads: JSON, {"jobs": [ENTRY, ...]} or a bare list of
// entries, each an object with a "file" and, optionally, "name", "anchors", "metric", "device",
// "dataset" and "bits" that override the command's options for that job. A reader of untrusted
// bytes on its own (tests/fuzz/fuzz_manifest.cpp), apart from the command that runs the jobs.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace vlattice {

struct ManifestJob {
    std::string file;  // relative to the manifest's folder when the entry gave a relative path
    std::optional<std::string> name;
    std::optional<long long> anchors;  // >= 1
    std::optional<std::string> metric;
    std::optional<std::string> device;
    std::optional<std::string> dataset;
    std::optional<unsigned> bits;  // 0, 2, 4 or 8
};

// Reads the manifest at `path`, which must be a regular file after links are followed (a FIFO
// would block the read, a directory cannot be one). Throws Error starting with the path, and
// naming the job (1-based) and the key where one is at fault. Names and option values are checked
// by the command, which knows their rules; here only their types and the key set.
std::vector<ManifestJob> read_batch_manifest(const std::string& path);

}  // namespace vlattice
