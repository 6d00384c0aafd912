// One 2-D numeric dataset of an HDF5 file (the ann-benchmarks layout keeps vectors in "train" and
// "test"), read through libhdf5: as float32 whatever its stored type, or as points in their stored
// type; and where a contiguous dataset's values lie, for a read in place.
#pragma once

#include "io/elements.hpp"

#include "vlattice/io.hpp"
#include "vlattice/point_set.hpp"
#include "vlattice/types.hpp"

#include <optional>
#include <string>

namespace vlattice::io {

Matrix read_hdf5(const std::string& path, const std::string& dataset, const ReadProgress& progress = {});

// The dataset's points in their stored type where a PointSet holds it as it is (IEEE float32 or
// float16, uint8, int8), else as read_hdf5 reads them.
PointSet read_hdf5_points(const std::string& path, const std::string& dataset, const ReadProgress& progress = {});

// Where the dataset's values lie: the file that holds them (another one behind an external link),
// their layout there where they can be read from it at their offset (a contiguous dataset of
// little-endian values of a type io reads), and the bytes its points take as a PointSet holds them.
// `reason` says why they cannot be read in place as points of their own type, as a phrase; when it
// is empty, the layout is one array of a stored type.
struct Hdf5Placement {
    std::string file;
    std::optional<ArrayLayout> layout;
    std::uint64_t bytes = 0;
    std::string reason;
};
Hdf5Placement hdf5_placement(const std::string& path, const std::string& dataset);

// Vector ids: an integer dataset read exactly, a floating-point one when its values are whole numbers.
IdMatrix read_hdf5_ids(const std::string& path, const std::string& dataset);

bool has_hdf5_dataset(const std::string& path, const std::string& dataset);

// The file's text attribute `name` ("" when it has none); throws Error when it is not text.
std::string read_hdf5_text_attribute(const std::string& path, const std::string& name);

}  // namespace vlattice::io
