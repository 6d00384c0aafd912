#include "vlattice/config.hpp"

#include "vlattice/types.hpp"

#include <cmath>
#include <string>

namespace vlattice {

namespace {

void require(bool ok, const std::string& message) {
    if (!ok) {
        throw Error(message);
    }
}

}  // namespace

void validate(const AnnealConfig& c, std::size_t n) {
    require(n > 0, "no vectors to compress");
    require(c.anchors >= 1, "anchors (-m) must be at least 1, got 0");
    require(c.anchors <= n, "anchors (-m) is " + std::to_string(c.anchors) + " but there are only " +
                                std::to_string(n) + " vectors; use -m <= " + std::to_string(n));
    require(c.anchors <= 0xFFFFFFFFull, "anchors (-m) must fit in 32 bits");
    require(n <= 0xFFFFFFFFull, std::to_string(n) + " vectors: at most 2^32 - 1 fit one run (ids are 32-bit)");
    require(c.max_iters >= 1, "iters must be at least 1, got " + std::to_string(c.max_iters));
    require(c.t0 >= 0.0 && std::isfinite(c.t0), "t0 must be a finite number >= 0, got " + std::to_string(c.t0));
    require(c.cooling >= 0.0 && c.cooling < 1.0, "cooling must be in [0, 1), got " + std::to_string(c.cooling));
    require(c.t_floor >= 0.0 && c.t_floor < 1.0, "t_floor must be in [0, 1), got " + std::to_string(c.t_floor));
    require(c.trim >= 0.0 && c.trim < 1.0, "trim must be in [0, 1), got " + std::to_string(c.trim));
    require(c.trim_final >= 0.0 && c.trim_final < 1.0,
            "trim-final must be in [0, 1), got " + std::to_string(c.trim_final));
    require(c.maintenance_every >= 0,
            "maintenance-every must be >= 0, got " + std::to_string(c.maintenance_every));
    require(c.merge_factor >= 0.0, "merge_factor must be >= 0, got " + std::to_string(c.merge_factor));
    require(c.split_factor > 1.0, "split_factor must be > 1, got " + std::to_string(c.split_factor));
    require(c.tolerance >= 0.0, "tolerance must be >= 0, got " + std::to_string(c.tolerance));
    require(c.min_gain >= 0.0 && std::isfinite(c.min_gain),
            "min-gain must be a finite number >= 0, got " + std::to_string(c.min_gain));
    require(c.patience >= 1, "patience must be >= 1, got " + std::to_string(c.patience));
    require(c.validate_every >= 0, "validate-every must be >= 0, got " + std::to_string(c.validate_every));
    require(c.validation_tolerance > 0.0,
            "validation_tolerance must be > 0, got " + std::to_string(c.validation_tolerance));
    require(c.threads >= 0, "threads must be >= 0, got " + std::to_string(c.threads));
}

}  // namespace vlattice
