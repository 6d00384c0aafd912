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

// Random draws of one purpose made from the seed of a run that also seeds k-means++ would repeat its
// sample: the rows held out to measure codes were the first rows k-means++ drew, which the anchors
// then sat close to, and measured a fifth lower than the rest. Each further purpose draws from its
// own stream, seeded by SplitMix64's finaliser of (seed, stream).
enum class RandomStream : std::uint64_t { held_out = 1, code_training = 2, training_rows = 3 };

inline std::uint64_t stream_seed(std::uint64_t seed, RandomStream stream) {
    std::uint64_t z = seed + 0x9e3779b97f4a7c15ull * (static_cast<std::uint64_t>(stream) + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

}  // namespace vlattice
