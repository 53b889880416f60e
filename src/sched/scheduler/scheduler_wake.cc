// Scheduler::planWakes: which refused pending pods would pass Troupe's filter now
// (wake_planner.h, docs/kubernetes-mode.md#waking-pending-pods).
#include <algorithm>
#include <deque>
#include <unordered_map>

#include "troupe/sched/filter/filter_stage_nodes.h"
#include "troupe/sched/scheduler/scheduler.h"

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
    // The nodes passing the node checks, by GPU product (queue admission is per product).
    std::vector<std::pair<std::string, std::vector<const model::NodeState*>>> by_product;
  };
  std::deque<Shape> shapes;  // references stay valid as it grows
  auto shapeOf = [&](const PendingPod& p) -> const Shape& {
    for (const Shape& s : shapes) {
      if (*s.req == p.request && s.gang == p.gang) return s;
    }
    std::vector<const model::NodeState*> nodes;
    filterSingle(cluster_, gangs_, p.request, names, p.gang, &nodes);
    Shape s{&p.request, p.gang, {}};
    for (const model::NodeState* node : nodes) {
      const std::string& product = node->info().gpu_product;
      auto it = std::find_if(s.by_product.begin(), s.by_product.end(),
                             [&](const auto& e) { return e.first == product; });
      if (it == s.by_product.end()) it = s.by_product.insert(s.by_product.end(), {product, {}});
      it->second.push_back(node);
    }
    shapes.push_back(std::move(s));
    return shapes.back();
  };
  const Clock::time_point t = now();
  const bool holding = reclaim_.holding(t);
  // The nodes of `shape` that `queue` may take `milli` more on (admission, then reclaim holds);
  // `first_only`: stop at the first.
  auto admitted = [&](const Shape& shape, const std::string& queue, int64_t milli, const std::string& gang,
                      bool first_only) {
    std::vector<const model::NodeState*> out;
    for (const auto& [product, nodes] : shape.by_product) {
      if (!queue.empty() && queues_.admit(queue, milli, product, gang)) continue;
      for (const model::NodeState* node : nodes) {
        if (holding && !queue.empty() && reclaim_.refusal(queue, node->info().name, t)) continue;
        out.push_back(node);
        if (first_only) return out;
      }
    }
    return out;
  };
  auto fits = [&](const WakeCandidate& c, int64_t queue_before) {
    const PendingPod& p = *records.at(c.uid);
    const Shape& shape = shapeOf(p);
    if (c.gang.empty()) return !admitted(shape, c.queue, queue_before + c.milli, "", true).empty();
    // A gang: once admitted, a further member is a pod on its own; a planned gang's members pass
    // onto their slots at their next filter (a refusal then is not about room); else its minimum
    // members must fit together, within what its queue admits for all of them.
    const GangBook::Progress progress = gangs_.progress(c.gang);
    if (progress.admitted) return !admitted(shape, c.queue, queue_before + c.milli, c.gang, true).empty();
    if (progress.planned) return false;
    // The book's minimum: a PodGroup's may have changed since this member's filter (elastic gangs).
    const int gang_min = progress.min_member > 0 ? progress.min_member : p.gang_min;
    const int need = std::max(1, gang_min - progress.bound);
    int64_t room = 0;  // members that fit, counting each node's free GPUs
    for (const model::NodeState* node :
         admitted(shape, c.queue, queue_before + std::max(1, gang_min) * c.milli, c.gang, false)) {
      room += node->freeMilliTotal() / std::max<int64_t>(1, c.milli);
    }
    return room >= need;
  };
  return planner.plan(std::move(candidates), fits, t, free_milli);
}

}  // namespace troupe::sched
