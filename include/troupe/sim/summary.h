// Reading a run the FGD paper's way, and summarising runs over seeds.
//
// Allocation % after a pod is round(used / capacity * 100, 2). The value "at X % arrived" is
// the mean of that over every pod whose arrived workload rounds (half to even) to X % of the
// capacity, the window [X - 0.5, X + 0.5]. Unallocated = 100 - that.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "troupe/sim/replay.h"

namespace troupe::sim {

// nullopt when no pod arrived inside the window.
std::optional<double> allocationAt(const RunResult& run, int percent);

struct Spread {
  double mean = 0;
  double sd = 0;  // sample standard deviation; 0 for one value
  double min = 0;
  double max = 0;
  int n = 0;
};
Spread spreadOf(const std::vector<double>& values);

// The curve thinned to one point per whole arrived percent (the window means), for plots.
std::vector<std::pair<int, double>> allocationCurve(const RunResult& run, int max_percent);

}  // namespace troupe::sim
