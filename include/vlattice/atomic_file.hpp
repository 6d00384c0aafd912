// Output files are written under a temporary name beside the target and renamed into place on
// commit(), so a crash or an error never leaves a half-written file under the real name and never
// touches an existing file there.
#pragma once

#include <fstream>
#include <string>

namespace vlattice {

class AtomicFile {
public:
    explicit AtomicFile(std::string path);
    ~AtomicFile();  // removes the temporary file unless commit() succeeded
    AtomicFile(const AtomicFile&) = delete;
    AtomicFile& operator=(const AtomicFile&) = delete;

    std::ofstream& stream() { return out_; }
    // Flushes, checks the stream, and renames over the target; throws Error naming the path.
    void commit();

private:
    std::string path_;
    std::string temp_path_;
    std::ofstream out_;
    bool committed_ = false;
};

}  // namespace vlattice
