// Writes two clusters to HDF5, reads them back and fits two anchors where `--device auto` would: the
// HDF5 round trip makes the link need HDF5's static archive, the fit BLAS and OpenMP, and the choice
// of device the CUDA runtime when the library was built with the GPU backend.
#include <vlattice/anneal.hpp>
#include <vlattice/device.hpp>
#include <vlattice/io.hpp>

#include <iostream>

int main(int argc, char** argv) {
    if (argc != 2) {
        std::cerr << "usage: consumer FILE.h5\n";
        return 2;
    }
    vlattice::Matrix points(4, 2);
    points.data = {0, 0, 0, 1, 10, 0, 10, 1};
    vlattice::write_vectors(argv[1], points);
    const vlattice::Matrix read = vlattice::read_vectors(argv[1]);
    vlattice::AnnealConfig config;
    config.anchors = 2;
    const vlattice::BackendChoice device = vlattice::make_backend(vlattice::DeviceKind::automatic, 0, 1);
    const vlattice::FitResult result = vlattice::fit(read, config, *device.backend);
    std::cout << read.rows << " x " << read.cols << ", " << result.anchors.rows << " anchors, energy "
              << result.energy << '\n';
}
