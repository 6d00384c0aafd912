// Owns one HDF5 identifier and releases it with the matching close function (H5Fclose, H5Dclose ...).
#pragma once

#include <hdf5.h>

namespace vlattice::io {

class Hdf5Handle {
public:
    Hdf5Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
    ~Hdf5Handle() {
        if (id_ >= 0) {
            close_(id_);
        }
    }
    Hdf5Handle(const Hdf5Handle&) = delete;
    Hdf5Handle& operator=(const Hdf5Handle&) = delete;

    hid_t get() const { return id_; }
    // Gives up ownership, for a caller that closes the identifier itself and checks the result.
    hid_t release() {
        const hid_t id = id_;
        id_ = -1;
        return id;
    }
    bool valid() const { return id_ >= 0; }

private:
    hid_t id_;
    herr_t (*close_)(hid_t);
};

}  // namespace vlattice::io
