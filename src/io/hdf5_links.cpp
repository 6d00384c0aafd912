#include "io/hdf5_links.hpp"

#include "io/binary_file.hpp"
#include "vlattice/types.hpp"

#include <cstdlib>
#include <filesystem>
#include <vector>

namespace vlattice::io {

namespace {

// The paths libhdf5 tries for an external link's file, in its order (H5Lcreate_external's
// documentation): an absolute name as it is; then the name, stripped to its last component when
// absolute, under each folder of HDF5_EXT_PREFIX, under the linking file's folder, and as it is.
// vlattice sets no H5Pset_elink_prefix, so that step never applies.
std::vector<std::string> link_target_paths(const std::string& linking_file, const std::string& target) {
    namespace fs = std::filesystem;
    std::vector<std::string> paths;
    fs::path name(target);
    if (name.is_absolute()) {
        paths.push_back(target);
        name = name.filename();
    }
    const fs::path linking_folder = fs::path(linking_file).parent_path();
    if (const char* prefixes = std::getenv("HDF5_EXT_PREFIX")) {
        std::string list = prefixes;
        for (std::size_t start = 0; start <= list.size();) {
            const std::size_t end = std::min(list.find(':', start), list.size());
            std::string prefix = list.substr(start, end - start);
            // libhdf5 reads ${ORIGIN} as the linking file's folder.
            if (const std::size_t origin = prefix.find("${ORIGIN}"); origin != std::string::npos) {
                prefix.replace(origin, 9, linking_folder.string());
            }
            if (!prefix.empty()) {
                paths.push_back((fs::path(prefix) / name).string());
            }
            start = end + 1;
        }
    }
    paths.push_back((linking_folder / name).string());
    paths.push_back(name.string());
    return paths;
}

herr_t refuse_irregular_targets(const char* linking_file, const char* /*linking_group*/, const char* target_file,
                                const char* target_object, unsigned* /*access_flags*/, hid_t /*fapl*/, void* refusal) {
    // No exception may cross libhdf5's C frames: the reason waits in `refusal` for the caller.
    const auto refuse = [&](const std::string& why) {
        *static_cast<std::string*>(refusal) =
            std::string(linking_file) + ": the external link to " + target_file + ":" + target_object + " " + why;
        return -1;
    };
    try {
        for (const std::string& path : link_target_paths(linking_file, target_file)) {
            regular_file_exists(path);
        }
        return 0;
    } catch (const Error& e) {
        return refuse(std::string("would open ") + e.what());
    } catch (const std::exception& e) {
        return refuse(std::string("cannot be checked: ") + e.what());
    }
}

}  // namespace

Hdf5Handle regular_link_access(std::string& refusal) {
    const hid_t access = H5Pcreate(H5P_DATASET_ACCESS);
    if (access < 0 || H5Pset_elink_cb(access, refuse_irregular_targets, &refusal) < 0) {
        if (access >= 0) {
            H5Pclose(access);
        }
        throw Error("cannot set up libhdf5's link access");
    }
    return Hdf5Handle(access, H5Pclose);
}

}  // namespace vlattice::io
