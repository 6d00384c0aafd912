// An HDF5 file written under a temporary name beside its target and renamed into place by commit(),
// so that a failed or killed write never leaves a partial file under the real name; the temporary
// file is removed on an error, and also when SIGINT, SIGTERM or SIGHUP stops the process.
#pragma once

#include "io/hdf5_handle.hpp"
#include "vlattice/atomic_file.hpp"

#include <hdf5.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace vlattice::io {

class Hdf5Writer {
public:
    // Throws Error naming `path` when it cannot be an output or the temporary file cannot be created.
    explicit Hdf5Writer(std::string path);

    // A contiguous dataset of `type` (a native type: the file stores it as given).
    void dataset(const char* name, hid_t type, const std::vector<hsize_t>& dims, const void* data);
    void text_attribute(const char* name, const std::string& text);
    void count_attribute(const char* name, std::uint64_t value);
    // Flushes, closes and renames onto the target.
    void commit();

private:
    void require(bool ok, const std::string& what) const;

    TemporaryOutput output_;
    std::unique_ptr<Hdf5Handle> file_;  // after output_, so that it is closed before output_ removes the file
};

}  // namespace vlattice::io
