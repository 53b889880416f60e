// What `troupe simulate --tenants` prints and writes: FIFO and fair share side by side as a
// table or JSON, each tenant's share over time as CSV, and a plot of it against the fair share
// as SVG. Pure: runs in, strings out. Numbers are means over the seeds; the CSV and the plot
// show the first seed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "troupe/sim/tenants.h"

namespace troupe::sim {

struct TenantReport {
  std::string nodes_file;
  std::string pods_file;
  std::string policy;
  double load = 1;
  double tune = 0;  // clones up to this x the GPU capacity (0: none)
  int64_t first_seed = 42;
  std::vector<TenantRun> fifo;  // one per seed
  std::vector<TenantRun> fair;  // one per seed, the same seeds
  double seconds = 0;
};

std::string renderTenantTable(const TenantReport& report);
std::string renderTenantJson(const TenantReport& report);
// ordering,seed,start_s,end_s,tenant,share,fair_share,allocated
std::string renderTenantSharesCsv(const TenantReport& report);
std::string renderTenantSvg(const TenantReport& report);

}  // namespace troupe::sim
