#include "io/hdf5_writer.hpp"
#include "vlattice/io.hpp"
#include "vlattice/search.hpp"

namespace vlattice {

void write_search_results(const std::string& path, const Neighbors& found) {
    if (!is_hdf5_path(path)) {
        throw Error(path + ": search results are written as HDF5; name the file .hdf5 or .h5");
    }
    io::Hdf5Writer file(path);
    file.dataset("neighbors", H5T_NATIVE_INT64, {found.queries, found.k}, found.ids.data());
    file.dataset("distances", H5T_NATIVE_FLOAT, {found.queries, found.k}, found.distances.data());
    file.commit();
}

}  // namespace vlattice
