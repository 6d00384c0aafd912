#include "io/elements.hpp"

#include "numeric.hpp"

namespace vlattice::io {

// In the x86-64-v3 copy the compiler converts with F16C, eight values an instruction; the default
// copy calls libgcc's software conversion, one value at a time. Both are exact.
VLATTICE_ALSO_FOR_X86_64_V3
void widen(const Half* source, std::size_t count, float* destination) {
    for (std::size_t i = 0; i < count; ++i) {
        destination[i] = half_to_float(source[i].bits);
    }
}

}  // namespace vlattice::io
