// Seeded randomness with results fixed across platforms and standard libraries: std::mt19937_64's
// output sequence is specified by the standard, but the std distributions are not, so the few
// draws vlattice needs are derived from the raw 64-bit words here.
#pragma once

#include <cstdint>
#include <random>

namespace vlattice {

class Random {
public:
    explicit Random(std::uint64_t seed) : engine_(seed) {}

    // Uniform in [0, 1) with 53 random bits.
    double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }

    // Uniform integer in [0, bound), bound > 0 (multiply-shift; the bias is below 2^-40 for any
    // bound vlattice uses).
    std::uint64_t below(std::uint64_t bound) {
        __extension__ using Wide = unsigned __int128;  // GCC and Clang; __extension__ keeps -Wpedantic quiet
        return static_cast<std::uint64_t>((static_cast<Wide>(engine_()) * bound) >> 64);
    }

private:
    std::mt19937_64 engine_;
};

}  // namespace vlattice
