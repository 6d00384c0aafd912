#include "vlattice/results_file.hpp"

#include "io/hdf5.hpp"
#include "io/hdf5_handle.hpp"
#include "io/hdf5_writer.hpp"
#include "vlattice/json_text.hpp"

#include <hdf5.h>


namespace vlattice {

namespace {

// The extent of dataset `name`, or an empty vector when it is missing or unreadable.
std::vector<hsize_t> extent(hid_t file, const char* name) {
    if (H5Lexists(file, name, H5P_DEFAULT) <= 0) {
        return {};
    }
    const io::Hdf5Handle set(H5Dopen2(file, name, H5P_DEFAULT), H5Dclose);
    const io::Hdf5Handle space(set.valid() ? H5Dget_space(set.get()) : -1, H5Sclose);
    if (!space.valid()) {
        return {};
    }
    const int rank = H5Sget_simple_extent_ndims(space.get());
    if (rank < 1 || rank > 2) {
        return {};
    }
    std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
    H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
    return dims;
}

}  // namespace

void write_results_h5(const std::string& path, const Matrix& anchors, const std::vector<std::uint32_t>& assignments,
                      const nlohmann::json& config, const nlohmann::json& metrics) {
    io::Hdf5Writer file(path);
    file.dataset("anchors", H5T_NATIVE_FLOAT, {anchors.rows, anchors.cols}, anchors.data.data());
    file.dataset("assignments", H5T_NATIVE_UINT32, {assignments.size()}, assignments.data());
    file.text_attribute("config", config.dump());
    file.text_attribute("metrics", metrics.dump());
    file.count_attribute("n", assignments.size());
    file.count_attribute("m", anchors.rows);
    file.count_attribute("d", anchors.cols);
    file.commit();
}

bool results_h5_complete(const std::string& path, std::uint64_t n, std::uint64_t m, std::uint64_t d) {
    std::error_code missing;
    if (!std::filesystem::is_regular_file(path, missing)) {
        return false;
    }
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    const io::Hdf5Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
    if (!file.valid()) {
        return false;
    }
    return extent(file.get(), "anchors") == std::vector<hsize_t>{m, d} &&
           extent(file.get(), "assignments") == std::vector<hsize_t>{n} &&
           H5Aexists(file.get(), "metrics") > 0 && H5Aexists(file.get(), "config") > 0;
}

nlohmann::json read_results_metrics(const std::string& path) {
    return parse_json_text(io::read_hdf5_text_attribute(path, "metrics"), path + ": attribute 'metrics'");
}

nlohmann::json read_results_config(const std::string& path) {
    return parse_json_text(io::read_hdf5_text_attribute(path, "config"), path + ": attribute 'config'");
}

}  // namespace vlattice
