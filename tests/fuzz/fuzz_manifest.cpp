// libFuzzer target for the batch manifest reader (read_batch_manifest): the input is the manifest
// file's bytes. Each input must either parse or fail with vlattice::Error; a crash, a sanitizer
// report, a hang or any other exception is a bug.
#include "vlattice/batch_manifest.hpp"
#include "vlattice/types.hpp"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const std::string path = "/tmp/vlattice-fuzz-manifest-" + std::to_string(getpid()) + ".json";
    {
        std::ofstream out(path, std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    }
    try {
        for (const vlattice::ManifestJob& job : vlattice::read_batch_manifest(path)) {
            // The paths are joined to the manifest's folder: never empty.
            if (job.file.empty()) {
                __builtin_trap();
            }
        }
    } catch (const vlattice::Error&) {
    }
    std::remove(path.c_str());
    return 0;
}
