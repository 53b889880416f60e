#include "troupe/sched/gang_planner.h"

#include <algorithm>

#include "troupe/sched/placement.h"

namespace troupe::sched {
namespace {

struct NodeFit {
  const model::NodeState* node;
  std::vector<std::vector<int>> sets;  // the GPU sets members would get, in order
  int64_t used_milli;
};

// Members of `req` that fit on the node as it is now, by placing them one after another on a
// scratch copy, so each member gets the GPUs it would really get.
NodeFit fitMembers(const model::NodeState& node, const GpuRequest& req, int limit) {
  NodeFit fit{&node, {}, node.usedMilliTotal()};
  model::NodeState scratch = node;
  for (int i = 0; i < limit; ++i) {
    std::optional<Placement> p = placeOnNode(scratch, req);
    if (!p) break;
    model::Allocation a;
    a.pod_uid = "plan#" + std::to_string(i);
    a.node = node.info().name;
    a.gpus = p->gpus;
    a.milli_per_gpu = req.milli_per_gpu;
    if (!scratch.add(a).isOk()) break;
    fit.sets.push_back(p->gpus);
  }
  return fit;
}

}  // namespace

GangPlanResult planGang(const std::vector<const model::NodeState*>& nodes, const GpuRequest& req, int members,
                        const std::string& gang_key) {
  GangPlanResult out;
  std::vector<NodeFit> fits;
  int64_t capacity_members = 0;  // on empty matching nodes: can it ever fit?
  for (const model::NodeState* n : nodes) {
    if (n->info().unschedulable) continue;
    NodeCheck check = checkNode(*n, req);
    if (check.fit == Fit::kNever) continue;
    const int per_node = req.gpus > 0 ? n->gpuCount() / req.gpus : members;
    capacity_members +=
        req.shared() ? static_cast<int64_t>(n->gpuCount()) * (1000 / req.milli_per_gpu) : per_node;
    NodeFit f = fitMembers(*n, req, members);
    if (!f.sets.empty()) fits.push_back(std::move(f));
  }
  if (capacity_members < members) {
    out.never_fits = true;
    out.reason = "troupe: gang " + gang_key + " needs " + std::to_string(members) + " pods of " +
                 std::to_string(req.gpus) + " GPUs, but the nodes that match its request can hold only " +
                 std::to_string(capacity_members) + " even when empty";
    return out;
  }
  // Fewest nodes: the nodes that take the most members first; among equals, fuller nodes
  // (pack) and then names, so plans are stable.
  std::sort(fits.begin(), fits.end(), [](const NodeFit& a, const NodeFit& b) {
    if (a.sets.size() != b.sets.size()) return a.sets.size() > b.sets.size();
    if (a.used_milli != b.used_milli) return a.used_milli > b.used_milli;
    return a.node->info().name < b.node->info().name;
  });
  int placed = 0;
  for (const NodeFit& f : fits) {
    for (const std::vector<int>& set : f.sets) {
      if (placed == members) break;
      out.slots.push_back(GangSlot{f.node->info().name, set, "", false});
      ++placed;
    }
    if (placed == members) break;
  }
  if (placed < members) {
    out.slots.clear();
    const int missing = (members - placed) * std::max(1, req.gpus);
    out.reason = "troupe: gang " + gang_key + " waits for capacity: " + std::to_string(placed) + " of " +
                 std::to_string(members) + " members fit now, " + std::to_string(missing) +
                 " more GPUs must free up (all-or-nothing)";
  }
  return out;
}

}  // namespace troupe::sched
