// Points of a stored type (float16, uint8, int8) beside their float32 values, for the tests that a
// run on stored points equals the run on those values.
#pragma once

#include "vlattice/half.hpp"
#include "vlattice/point_set.hpp"
#include "vlattice/types.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>

namespace vlattice::test {

struct StoredCase {
    PointSet stored;
    Matrix values;  // the same points as float32
};

// A Gaussian mixture in the type's range: around 100 for uint8, 0 for int8 (both clamped), and
// float16 values of unit noise around centres spread by 4.
inline StoredCase stored_mixture(StoredType type, std::size_t n, std::size_t d, std::mt19937_64& rng,
                                 std::size_t clusters = 8) {
    StoredCase out{PointSet::unset(type, n, d), Matrix(n, d)};
    std::normal_distribution<float> noise(0.0f, 1.0f);
    const float spread = type == StoredType::f16 ? 4.0f : 25.0f;
    const float centre = type == StoredType::u8 ? 100.0f : 0.0f;
    const float unit = type == StoredType::f16 ? 1.0f : 6.0f;
    Matrix centres(clusters, d);
    for (float& v : centres.data) {
        v = centre + spread * noise(rng);
    }
    std::uniform_int_distribution<std::size_t> pick(0, clusters - 1);
    auto* bytes = static_cast<unsigned char*>(out.stored.values());
    for (std::size_t i = 0; i < n; ++i) {
        const float* c = centres.row(pick(rng));
        for (std::size_t k = 0; k < d; ++k) {
            const float v = c[k] + unit * noise(rng);
            const std::size_t e = i * d + k;
            if (type == StoredType::f16) {
                const std::uint16_t h = float_to_half(v);
                std::memcpy(bytes + 2 * e, &h, 2);
                out.values.data[e] = half_to_float(h);
            } else if (type == StoredType::u8) {
                const auto u = static_cast<std::uint8_t>(std::clamp(std::lround(v), 0L, 255L));
                bytes[e] = u;
                out.values.data[e] = u;
            } else {
                const auto s = static_cast<std::int8_t>(std::clamp(std::lround(v), -128L, 127L));
                std::memcpy(bytes + e, &s, 1);
                out.values.data[e] = s;
            }
        }
    }
    return out;
}

}  // namespace vlattice::test
