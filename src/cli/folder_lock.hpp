// One writer per output folder: two batches writing one folder would each rewrite the summary from
// their own rows, and the last to finish would drop the other's. The lock is flock(2) on a file in
// the folder, which the kernel releases when the holder exits however it exits, so a killed batch
// leaves no stale lock behind.
#pragma once

#include <string>

namespace vlattice::cli {

class FolderLock {
public:
    // Takes the lock on `folder`/`lock_name` without waiting; throws Error naming the folder and the
    // holder's process id (as the holder wrote it into the file) when another process holds it.
    FolderLock(const std::string& folder, const std::string& lock_name);
    ~FolderLock();
    FolderLock(const FolderLock&) = delete;
    FolderLock& operator=(const FolderLock&) = delete;

private:
    int fd_ = -1;
};

}  // namespace vlattice::cli
