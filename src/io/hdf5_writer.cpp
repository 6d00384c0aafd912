#include "io/hdf5_writer.hpp"

#include "temporary_files.hpp"
#include "vlattice/atomic_file.hpp"
#include "vlattice/types.hpp"

#include <filesystem>

namespace vlattice::io {

Hdf5Writer::Hdf5Writer(std::string path)
    : path_(std::move(path)), temporary_(temporary_name_for(path_)), signal_slot_(kNoTemporarySlot) {
    check_output_path(path_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    signal_slot_ = register_temporary(temporary_);
    file_ = std::make_unique<Hdf5Handle>(H5Fcreate(temporary_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
    if (!file_->valid()) {
        forget_temporary(signal_slot_);
    }
    require(file_->valid(), "create " + temporary_);
}

Hdf5Writer::~Hdf5Writer() {
    if (!committed_) {
        file_.reset();
        std::error_code ignored;
        std::filesystem::remove(temporary_, ignored);
        forget_temporary(signal_slot_);
    }
}

void Hdf5Writer::require(bool ok, const std::string& what) const {
    if (!ok) {
        throw Error(path_ + ": cannot write the HDF5 file (" + what + ")");
    }
}

void Hdf5Writer::dataset(const char* name, hid_t type, const std::vector<hsize_t>& dims, const void* data) {
    const Hdf5Handle space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose);
    const Hdf5Handle set(H5Dcreate2(file_->get(), name, type, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                         H5Dclose);
    require(space.valid() && set.valid() && H5Dwrite(set.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0,
            std::string("dataset ") + name);
}

void Hdf5Writer::text_attribute(const char* name, const std::string& text) {
    const Hdf5Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(type.get(), text.size() + 1);
    H5Tset_cset(type.get(), H5T_CSET_UTF8);
    const Hdf5Handle space(H5Screate(H5S_SCALAR), H5Sclose);
    const Hdf5Handle attribute(H5Acreate2(file_->get(), name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
                               H5Aclose);
    require(attribute.valid() && H5Awrite(attribute.get(), type.get(), text.c_str()) >= 0,
            std::string("attribute ") + name);
}

void Hdf5Writer::count_attribute(const char* name, std::uint64_t value) {
    const Hdf5Handle space(H5Screate(H5S_SCALAR), H5Sclose);
    const Hdf5Handle attribute(H5Acreate2(file_->get(), name, H5T_STD_U64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT),
                               H5Aclose);
    require(attribute.valid() && H5Awrite(attribute.get(), H5T_NATIVE_UINT64, &value) >= 0,
            std::string("attribute ") + name);
}

void Hdf5Writer::commit() {
    require(H5Fflush(file_->get(), H5F_SCOPE_GLOBAL) >= 0, "flush");
    file_.reset();
    std::error_code failed;
    std::filesystem::rename(temporary_, path_, failed);
    require(!failed, "rename into place: " + failed.message());
    forget_temporary(signal_slot_);
    committed_ = true;
}

}  // namespace vlattice::io
