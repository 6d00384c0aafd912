// Both backends must report calls made out of order as errors rather than read state that does not
// exist yet.
#pragma once

#include "vlattice/backend.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

namespace vlattice::test {

inline void check_call_order(Backend& backend) {
    const Matrix points(10, 3);  // outlives every call: the CPU backend borrows it
    CHECK_THROWS_AS(backend.assign(), Error);
    CHECK_THROWS_AS(backend.upload_anchors(Matrix(2, 3)), Error);
    backend.upload_points(points, {});
    CHECK_THROWS_AS(backend.upload_anchors(Matrix(2, 4)), Error);
    backend.upload_anchors(Matrix(2, 3));
    CHECK_THROWS_AS(backend.robust_reduce(0.1), Error);
    CHECK_THROWS_AS(backend.energy(), Error);
    CHECK_THROWS_AS(backend.update(1.0), Error);
    CHECK(backend.download_stats().count.empty());
    CHECK(backend.download_assignments() == std::vector<std::uint32_t>(10, 0xFFFFFFFFu));
    CHECK(backend.assign().changed == 10);
    CHECK_THROWS_AS(backend.robust_reduce(1.0), Error);
}

}  // namespace vlattice::test
