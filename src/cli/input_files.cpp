#include "input_files.hpp"

#include "vlattice/io.hpp"

namespace vlattice::cli {

void check_inputs(const std::vector<NamedPath>& inputs) {
    for (const NamedPath& input : inputs) {
        if (!input.path.empty()) {
            check_input_file(input.path);
        }
    }
}

}  // namespace vlattice::cli
