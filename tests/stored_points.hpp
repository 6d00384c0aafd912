// Points of a stored type (float16, uint8, int8) beside their float32 values, for the tests that a
// run on stored points equals the run on those values; the files that hold them; and the check
// that two fits are the same.
#pragma once

#include "support.hpp"

#include "vlattice/anneal.hpp"
#include "vlattice/half.hpp"
#include "vlattice/io.hpp"
#include "vlattice/point_set.hpp"
#include "vlattice/types.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>

#include <catch2/catch.hpp>

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

template <class T>
inline std::string bytes_of(T value) {
    return std::string(reinterpret_cast<const char*>(&value), sizeof value);
}

inline std::string raw_values(const PointSet& set) {
    return std::string(static_cast<const char*>(set.view().data()), set.bytes());
}

// A .npy of the set's own type.
inline void write_stored_npy(const std::string& path, const PointSet& set) {
    const char* descr = set.type() == StoredType::f16 ? "<f2" : set.type() == StoredType::u8 ? "|u1" : "|i1";
    std::string header = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': (" +
                         std::to_string(set.rows()) + ", " + std::to_string(set.cols()) + "), }";
    while ((10 + header.size() + 1) % 64 != 0) {
        header += ' ';
    }
    header += '\n';
    write_file(path, std::string("\x93NUMPY\x01\x00", 8) + bytes_of(static_cast<std::uint16_t>(header.size())) +
                         header + raw_values(set));
}

// A big-ann file (.u8bin, .i8bin) of an 8-bit set.
inline void write_bigann(const std::string& path, const PointSet& set) {
    write_file(path, bytes_of(static_cast<std::int32_t>(set.rows())) + bytes_of(static_cast<std::int32_t>(set.cols())) +
                         raw_values(set));
}

// A .bvecs of a uint8 set: each row after its dimension.
inline void write_bvecs(const std::string& path, const PointSet& set) {
    const std::string values = raw_values(set);
    std::string out;
    for (std::size_t i = 0; i < set.rows(); ++i) {
        out += bytes_of(static_cast<std::int32_t>(set.cols())) + values.substr(i * set.cols(), set.cols());
    }
    write_file(path, out);
}

// The set written in a file that holds its type: .npy for float16, .u8bin or .i8bin for 8-bit
// values, .fbin for float32 (the values of `c`).
inline std::string write_stored_file(const ScratchDir& dir, const StoredCase& c, StoredType type) {
    switch (type) {
    case StoredType::f16:
        write_stored_npy(dir.path("x.npy"), c.stored);
        return dir.path("x.npy");
    case StoredType::u8:
        write_bigann(dir.path("x.u8bin"), c.stored);
        return dir.path("x.u8bin");
    case StoredType::i8:
        write_bigann(dir.path("x.i8bin"), c.stored);
        return dir.path("x.i8bin");
    case StoredType::f32:
        break;
    }
    write_vectors(dir.path("x.fbin"), c.values);
    return dir.path("x.fbin");
}

// `got` is `want`, bit for bit: anchors, assignments, energies, maintenance and every record.
inline void check_same_fit(const FitResult& got, const FitResult& want) {
    CHECK(got.iterations == want.iterations);
    CHECK(got.stop_reason == want.stop_reason);
    CHECK(got.assignments == want.assignments);
    CHECK(got.anchors.data == want.anchors.data);
    CHECK(got.energy == want.energy);
    CHECK(got.validation.recomputed_energy == want.validation.recomputed_energy);
    CHECK((got.merged == want.merged && got.split == want.split && got.reseeded == want.reseeded &&
           got.dropped_empty == want.dropped_empty));
    REQUIRE(got.history.size() == want.history.size());
    for (std::size_t i = 0; i < want.history.size(); ++i) {
        CHECK(got.history[i].energy == want.history[i].energy);
        CHECK(got.history[i].changed == want.history[i].changed);
    }
}

// The set written as TEXMEX rows, each after its dimension: .bvecs for uint8, .fvecs for float32
// (the values of `c`).
inline std::string write_texmex_file(const ScratchDir& dir, const StoredCase& c, StoredType type) {
    if (type == StoredType::u8) {
        write_bvecs(dir.path("x.bvecs"), c.stored);
        return dir.path("x.bvecs");
    }
    write_vectors(dir.path("x.fvecs"), c.values);
    return dir.path("x.fvecs");
}

}  // namespace vlattice::test
