#include "troupe/sim/packing_floor.h"

#include <algorithm>
#include <functional>
#include <set>
#include <vector>

#include "troupe/model/node.h"

namespace troupe::sim {

int64_t hindsightIdleMilli(std::span<const sched::GpuRequest* const> arrived, int64_t gpus) {
  constexpr int64_t kGpu = model::kMilliPerGpu;
  int64_t whole_gpus = 0;
  std::vector<int64_t> shares;
  for (const sched::GpuRequest* r : arrived) {
    if (!r->wantsGpus()) continue;
    if (r->milli_per_gpu >= kGpu) {
      whole_gpus += r->gpus;
    } else {
      // A share of several GPUs (not in the traces) packs as that many single shares.
      shares.insert(shares.end(), static_cast<size_t>(r->gpus), r->milli_per_gpu);
    }
  }
  int64_t untouched = gpus - std::min(whole_gpus, gpus);
  int64_t placed = std::min(whole_gpus, gpus) * kGpu;
  std::sort(shares.begin(), shares.end(), std::greater<>());
  std::multiset<int64_t> gaps;  // free milli of the GPUs that hold shares
  for (int64_t s : shares) {
    if (auto fit = gaps.lower_bound(s); fit != gaps.end()) {
      const int64_t left = *fit - s;
      gaps.erase(fit);
      gaps.insert(left);
    } else if (untouched > 0) {
      --untouched;
      gaps.insert(kGpu - s);
    } else {
      continue;
    }
    placed += s;
  }
  return gpus * kGpu - placed;
}

}  // namespace troupe::sim
