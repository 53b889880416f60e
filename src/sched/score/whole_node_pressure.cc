#include "troupe/sched/score/whole_node_pressure.h"

#include <algorithm>

#include "troupe/sched/score/fragmentation.h"

namespace troupe::sched {
namespace {

// Slots by `whole_free` fully free GPUs and `cpu_left` milli-CPU, each pod taking `cpu_milli`.
int slotsBy(int whole_free, int64_t cpu_left, int64_t cpu_milli) {
  const int by_gpus = std::max(0, whole_free) / kWholeNodeGpus;
  if (cpu_milli <= 0) return by_gpus;
  return static_cast<int>(std::min<int64_t>(by_gpus, std::max<int64_t>(0, cpu_left) / cpu_milli));
}

}  // namespace

WholeNodePressure WholeNodePressure::compute(const std::vector<WholeNodeDemand>& demand, int64_t free_milli,
                                             const std::vector<int64_t>& slots) {
  WholeNodePressure out;
  for (size_t i = 0; i < demand.size() && i < slots.size(); ++i) {
    // No slot left at a level: nothing to keep whole for it any more.
    if (demand[i].share <= 0 || free_milli <= 0 || slots[i] <= 0) continue;
    out.levels_.push_back(
        {demand[i].cpu_milli,
         demand[i].share * static_cast<double>(free_milli) /
             (static_cast<double>(kWholeNodeGpus * model::kMilliPerGpu) * static_cast<double>(slots[i]))});
  }
  return out;
}

WholeNodePressure WholeNodePressure::compute(double share, int64_t free_milli, int64_t slots,
                                             int64_t cpu_milli) {
  return compute({{cpu_milli, share}}, free_milli, {slots});
}

double WholeNodePressure::value() const {
  double v = 0;
  for (const Level& l : levels_) v += l.value;
  return v;
}

double WholeNodePressure::usedUpBy(const model::NodeState& node, const GpuRequest& req) const {
  double v = 0;
  for (const Level& l : levels_) {
    if (slotsTaken(node, req, l.cpu_milli) > 0) v += l.value;
  }
  return v;
}

int WholeNodePressure::slotsOf(const model::NodeState& node, int64_t cpu_milli) {
  return slotsBy(node.wholeFreeCount(), cpuLeft(node), cpu_milli);
}

int WholeNodePressure::slotsTaken(const model::NodeState& node, const GpuRequest& req, int64_t cpu_milli) {
  const int before = slotsOf(node, cpu_milli);
  if (before == 0) return 0;
  int fresh = req.wantsGpus() ? req.gpus : 0;
  if (req.shared()) {
    const uint64_t free = node.fullyFreeMask();
    for (int g = 0; g < std::min(64, node.gpuCount()); ++g) {
      if ((free >> g & 1U) == 0 && node.gpuFreeMilli(g) >= req.milli_per_gpu) {
        fresh = 0;
        break;
      }
    }
  }
  return before - slotsBy(node.wholeFreeCount() - fresh, cpuLeft(node) - req.cpu_milli, cpu_milli);
}

}  // namespace troupe::sched
