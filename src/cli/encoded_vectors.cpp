#include "encoded_vectors.hpp"

#include "activity.hpp"

namespace vlattice::cli {

VlatFile read_encoded_vectors(const std::string& path) {
    VlatFile file = during("reading " + path, [&] { return read_vlat(path); });
    if (file.n == 0) {
        throw Error(path + " is a model with no vectors; encode vectors with it first");
    }
    return file;
}

}  // namespace vlattice::cli
