// The CPU search of product-coded files (include/vlattice/search.hpp's asymmetric score), which
// search() hands them to.
#pragma once

#include "vlattice/format.hpp"
#include "vlattice/search.hpp"
#include "vlattice/types.hpp"

namespace vlattice {

// The caller has run check_search.
Neighbors search_product(const VlatFile& file, const Matrix& queries, const SearchOptions& options);

}  // namespace vlattice
