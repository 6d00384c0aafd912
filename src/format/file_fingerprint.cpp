#include "vlattice/file_fingerprint.hpp"

#include "io/binary_file.hpp"
#include "vlattice/types.hpp"

#include <xxhash.h>

#include <algorithm>
#include <memory>
#include <vector>

namespace vlattice {

FileFingerprint file_fingerprint(const std::string& path) {
    io::BinaryFile in(path);
    const std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(), XXH3_freeState);
    if (!state || XXH3_64bits_reset(state.get()) != XXH_OK) {
        throw Error(path + ": cannot start the hash of its contents (out of memory)");
    }
    std::vector<char> chunk(std::size_t{1} << 20);
    while (in.position() < in.size()) {
        const std::size_t bytes =
            static_cast<std::size_t>(std::min<std::uint64_t>(chunk.size(), in.size() - in.position()));
        in.read(chunk.data(), bytes, "the bytes at offset " + std::to_string(in.position()));
        XXH3_64bits_update(state.get(), chunk.data(), bytes);
    }
    return {in.size(), XXH3_64bits_digest(state.get())};
}

}  // namespace vlattice
