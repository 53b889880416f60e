// Scheduler::planWakes: which refused pending pods would pass Troupe's filter now
// (wake_planner.h, docs/kubernetes-mode.md#waking-pending-pods).
#include <algorithm>
#include <deque>
#include <unordered_map>

#include "troupe/sched/scheduler.h"

namespace troupe::sched {

std::vector<WakeCandidate> Scheduler::planWakes(WakePlanner& planner) {
  std::vector<std::pair<std::string, PendingPod>> refused = pending_.refused();
  std::unordered_map<std::string, const PendingPod*> records;
  std::vector<WakeCandidate> candidates;
  candidates.reserve(refused.size());
  std::shared_lock lock(mu_);
  for (const auto& [uid, p] : refused) {
    // Holding GPUs: bound, or its bind under way. A CPU-only pod Troupe refused is invalid.
    if (!p.request.wantsGpus() || cluster_.nodeOf(uid)) continue;
    candidates.push_back({uid, p.key, p.queue, p.gang, p.request.totalMilli(), p.priority, p.seq});
    records.emplace(uid, &p);
  }
  // The planner forgets the pods it no longer sees: it is called with none too.
  std::vector<std::string> names;
  int64_t free_milli = 0;
  if (!candidates.empty()) {
    cluster_.forEachNode([&](const model::NodeState& node) {
      names.push_back(node.info().name);
      if (!node.info().unschedulable) free_milli += node.freeMilliTotal();
      return true;
    });
  }
  // The node checks depend on the request (and a gang's own drained nodes) only: once per
  // shape and round, so a thousand pods of one shape cost one pass over the nodes. Queue
  // admission and reclaim holds are then asked per pod (per GPU product, not per node).
  struct Shape {
    const GpuRequest* req;
    std::string gang;
    std::vector<const model::NodeState*> nodes;  // passing the node checks
  };
  std::deque<Shape> shapes;  // references stay valid as it grows
  auto shapeOf = [&](const PendingPod& p) -> const Shape& {
    for (const Shape& s : shapes) {
      if (*s.req == p.request && s.gang == p.gang) return s;
    }
    Shape s{&p.request, p.gang, {}};
    filterSingleLocked(p.request, names, p.gang, &s.nodes);
    shapes.push_back(std::move(s));
    return shapes.back();
  };
  const Clock::time_point t = now();
  const bool holding = reclaim_.holding(t);
  // The nodes of `shape` that `queue` may take `milli` more on (admission, then reclaim holds).
  auto admitted = [&](const Shape& shape, const std::string& queue, int64_t milli, const std::string& gang) {
    std::vector<const model::NodeState*> out;
    std::vector<std::pair<std::string, bool>> by_product;
    for (const model::NodeState* node : shape.nodes) {
      const std::string& product = node->info().gpu_product;
      auto it = std::find_if(by_product.begin(), by_product.end(),
                             [&](const auto& e) { return e.first == product; });
      if (it == by_product.end()) {
        by_product.emplace_back(product, !queues_.admit(queue, milli, product, gang));
        it = by_product.end() - 1;
      }
      if (!it->second || (holding && reclaim_.refusal(queue, node->info().name, t))) continue;
      out.push_back(node);
    }
    return out;
  };
  auto fits = [&](const WakeCandidate& c, int64_t queue_before) {
    const PendingPod& p = *records.at(c.uid);
    const Shape& shape = shapeOf(p);
    if (shape.nodes.empty()) return false;
    if (c.gang.empty())
      return c.queue.empty() || !admitted(shape, c.queue, queue_before + c.milli, "").empty();
    // A gang: its plan (if any) keeps a slot for each member; else its minimum members must fit
    // together, within what its queue admits for all of them.
    const GangBook::Progress progress = gangs_.progress(c.gang);
    if (progress.planned || progress.admitted) return true;
    const int need = std::max(1, p.gang_min - progress.bound);
    const std::vector<const model::NodeState*> nodes =
        c.queue.empty() ? shape.nodes
                        : admitted(shape, c.queue, queue_before + std::max(1, p.gang_min) * c.milli, c.gang);
    int64_t room = 0;  // members that fit, counting each node's free GPUs
    for (const model::NodeState* node : nodes) room += node->freeMilliTotal() / std::max<int64_t>(1, c.milli);
    return room >= need;
  };
  return planner.plan(std::move(candidates), fits, t, free_milli);
}

}  // namespace troupe::sched
