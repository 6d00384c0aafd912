#include "vlattice/results_file.hpp"

#include "io/hdf5.hpp"
#include "io/hdf5_handle.hpp"

#include <hdf5.h>

#include <cstdio>
#include <filesystem>
#include <unistd.h>

namespace vlattice {

namespace {

void require(bool ok, const std::string& path, const std::string& what) {
    if (!ok) {
        throw Error(path + ": cannot write the results file (" + what + ")");
    }
}

void write_dataset(hid_t file, const std::string& path, const char* name, hid_t type, const hsize_t* dims, int rank,
                   const void* data) {
    const io::Hdf5Handle space(H5Screate_simple(rank, dims, nullptr), H5Sclose);
    const io::Hdf5Handle set(H5Dcreate2(file, name, type, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
    require(space.valid() && set.valid() && H5Dwrite(set.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0, path,
            std::string("dataset ") + name);
}

void write_text(hid_t file, const std::string& path, const char* name, const std::string& text) {
    const io::Hdf5Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(type.get(), text.size() + 1);
    H5Tset_cset(type.get(), H5T_CSET_UTF8);
    const io::Hdf5Handle space(H5Screate(H5S_SCALAR), H5Sclose);
    const io::Hdf5Handle attribute(H5Acreate2(file, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
    require(attribute.valid() && H5Awrite(attribute.get(), type.get(), text.c_str()) >= 0, path,
            std::string("attribute ") + name);
}

void write_count(hid_t file, const std::string& path, const char* name, std::uint64_t value) {
    const io::Hdf5Handle space(H5Screate(H5S_SCALAR), H5Sclose);
    const io::Hdf5Handle attribute(H5Acreate2(file, name, H5T_STD_U64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
    require(attribute.valid() && H5Awrite(attribute.get(), H5T_NATIVE_UINT64, &value) >= 0, path,
            std::string("attribute ") + name);
}

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
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    const std::string temporary = path + ".tmp." + std::to_string(::getpid());
    try {
        {
            const io::Hdf5Handle file(H5Fcreate(temporary.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
            require(file.valid(), path, "create " + temporary);
            const hsize_t anchor_dims[2] = {anchors.rows, anchors.cols};
            write_dataset(file.get(), path, "anchors", H5T_NATIVE_FLOAT, anchor_dims, 2, anchors.data.data());
            const hsize_t assignment_dims[1] = {assignments.size()};
            write_dataset(file.get(), path, "assignments", H5T_NATIVE_UINT32, assignment_dims, 1, assignments.data());
            write_text(file.get(), path, "config", config.dump());
            write_text(file.get(), path, "metrics", metrics.dump());
            write_count(file.get(), path, "n", assignments.size());
            write_count(file.get(), path, "m", anchors.rows);
            write_count(file.get(), path, "d", anchors.cols);
            require(H5Fflush(file.get(), H5F_SCOPE_GLOBAL) >= 0, path, "flush");
        }
        std::filesystem::rename(temporary, path);
    } catch (...) {
        std::error_code ignored;
        std::filesystem::remove(temporary, ignored);
        throw;
    }
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
    return nlohmann::json::parse(io::read_hdf5_text_attribute(path, "metrics"));
}

}  // namespace vlattice
