// The HDF5 results file `vlattice batch` writes beside each .vlat, for readers such as h5py:
// datasets `anchors` (m x d float32) and `assignments` (n uint32), and text attributes `config` and
// `metrics` (JSON) plus numeric attributes n, d, m. Written under a temporary name and renamed.
#pragma once

#include "vlattice/types.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace vlattice {

void write_results_h5(const std::string& path, const Matrix& anchors, const std::vector<std::uint32_t>& assignments,
                      const nlohmann::json& config, const nlohmann::json& metrics);

// Whether `path` is a complete results file for n vectors, m anchors of dimension d.
bool results_h5_complete(const std::string& path, std::uint64_t n, std::uint64_t m, std::uint64_t d);

// The `metrics` attribute of a complete results file.
nlohmann::json read_results_metrics(const std::string& path);

// The `config` attribute of a complete results file.
nlohmann::json read_results_config(const std::string& path);

}  // namespace vlattice
