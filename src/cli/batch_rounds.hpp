// How `vlattice batch` spreads its jobs over the ranks of mpirun or srun: in rounds of one job per
// rank, the largest inputs first, so that the jobs of a round take about as long and the ranks
// meet after each round to hand rank 0 their summary rows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace vlattice::cli {

constexpr std::size_t kNoJob = std::numeric_limits<std::size_t>::max();

// rounds[r][k]: the job rank k runs in round r, or kNoJob (the last round's spare ranks). One rank
// runs the jobs in their own order; several take them by input size, largest first (ties in job
// order), round by round.
std::vector<std::vector<std::size_t>> job_rounds(const std::vector<std::uint64_t>& input_bytes, int ranks);

}  // namespace vlattice::cli
