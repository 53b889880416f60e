// What `troupe simulate` prints and writes: the table, the same as JSON, the curves as CSV and
// a plot of GPU allocation against arrived workload as SVG. Pure: strings in, strings out.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "troupe/sim/replay.h"

namespace troupe::sim {

struct PolicyRuns {
  std::string policy;           // the policy's name
  std::vector<RunResult> runs;  // one per seed
};

struct Report {
  std::string nodes_file;
  std::string pods_file;
  int64_t first_seed = 42;
  int seeds = 1;
  std::vector<int> points = {100, 130};  // arrived % reported
  std::vector<PolicyRuns> policies;
  double seconds = 0;  // wall time of the whole simulation
};

// Unallocated GPU % at `percent` arrived, per seed (seeds whose window is empty are left out).
std::vector<double> unallocatedAt(const PolicyRuns& runs, int percent);

// The hindsight floor at 100% arrived (RunResult::floor_idle_milli) in % of the GPUs, per seed
// of the first policy that has it (it is the same for every policy of a seed).
std::vector<double> floorPercent(const Report& report);

std::string renderTable(const Report& report);
// Failed requests per SizeClass at 100% arrived (mean ± sd over seeds), with the GPU-weighted
// share of each class that was placed.
std::string renderSizeTable(const Report& report);
// The defragmentation advisor's outcomes (RunResult::defrag); "" when no run has one.
std::string renderDefragTable(const Report& report);
std::string renderJson(const Report& report);
// policy,arrived_percent,allocation_mean,allocation_sd,seeds
std::string renderCurvesCsv(const Report& report);
// policy,seed,unallocated_at_<X>...,multi_gpu_placed,multi_gpu_best,pods,placed,seconds,
// failed_<size class>... (at 100% arrived)
std::string renderRunsCsv(const Report& report);
std::string renderSvg(const Report& report);

}  // namespace troupe::sim
