// External links: libhdf5 opens the file a link names by itself, searching several folders for it.
// A named pipe found there would block the open forever, so every place it may look is checked first.
#pragma once

#include "io/hdf5_handle.hpp"

#include <string>

namespace vlattice::io {

// A link (and dataset) access property list under which an external link is followed only when
// every file libhdf5 may open for it is missing or a regular file. When one is not, the traversal
// fails and `refusal` holds the reason, naming the link and the file; `refusal` must outlive the list.
Hdf5Handle regular_link_access(std::string& refusal);

}  // namespace vlattice::io
