#include "troupe/sched/score/whole_node_pressure.h"

#include <algorithm>

namespace troupe::sched {

WholeNodePressure WholeNodePressure::compute(double share, int64_t free_milli, int64_t slots) {
  WholeNodePressure out;
  // No slot left: nothing to keep whole any more.
  if (share <= 0 || free_milli <= 0 || slots <= 0) return out;
  out.value_ = share * static_cast<double>(free_milli) /
               (static_cast<double>(kWholeNodeGpus * model::kMilliPerGpu) * static_cast<double>(slots));
  return out;
}

int WholeNodePressure::slotsOf(const model::NodeState& node) {
  return std::max(0, node.wholeFreeCount()) / kWholeNodeGpus;
}

int WholeNodePressure::slotsTaken(const model::NodeState& node, const GpuRequest& req) {
  if (!req.wantsGpus()) return 0;
  const int before = slotsOf(node);
  if (before == 0) return 0;
  int fresh = req.gpus;
  if (req.shared()) {
    const uint64_t free = node.fullyFreeMask();
    for (int g = 0; g < std::min(64, node.gpuCount()); ++g) {
      if ((free >> g & 1U) == 0 && node.gpuFreeMilli(g) >= req.milli_per_gpu) {
        fresh = 0;
        break;
      }
    }
  }
  return before - std::max(0, node.wholeFreeCount() - fresh) / kWholeNodeGpus;
}

}  // namespace troupe::sched
