#include "io/hdf5_writer.hpp"

#include "vlattice/types.hpp"

namespace vlattice::io {

namespace {

// libhdf5 keeps a file whose close failed (its flush on a full disk) in its table, and the cleanup it
// runs at exit then closes it again and crashes (HDFGroup/hdf5 issue 2257; h5py issue 914): a write
// error became a segmentation fault. Every file vlattice opens is closed by its owner before exit,
// so that cleanup has nothing to do; it is turned off here, during static initialization, because
// the call counts only before the library's first use.
[[maybe_unused]] const bool kNoCleanupAtExit = H5dont_atexit() >= 0;

}  // namespace

Hdf5Writer::Hdf5Writer(std::string path) : output_(std::move(path)) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    file_ = std::make_unique<Hdf5Handle>(
        H5Fcreate(output_.temporary().c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
    require(file_->valid(), "create " + output_.temporary());
}

void Hdf5Writer::require(bool ok, const std::string& what) const {
    if (!ok) {
        throw Error(output_.path() + ": cannot write the HDF5 file (" + what + ")");
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
    // Checked: a close that fails has not written everything, and the file must not be renamed into place.
    require(H5Fclose(file_->release()) >= 0, "close");
    output_.commit();
}

}  // namespace vlattice::io
