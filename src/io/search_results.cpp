#include "io/hdf5_writer.hpp"
#include "vlattice/io.hpp"
#include "vlattice/search.hpp"

namespace vlattice {

void check_search_results_output(const std::string& path) {
    if (!is_hdf5_path(path)) {
        throw Error(path + ": search results are written as HDF5; name the file .hdf5 or .h5");
    }
}

void write_search_results(const std::string& path, const Neighbors& found, Metric metric) {
    check_search_results_output(path);
    io::Hdf5Writer file(path);
    file.dataset("neighbors", H5T_NATIVE_INT64, {found.queries, found.k}, found.ids.data());
    file.dataset("distances", H5T_NATIVE_FLOAT, {found.queries, found.k}, found.distances.data());
    file.text_attribute("distance", distance_name(metric));
    file.commit();
}

}  // namespace vlattice
