// Scheduler::planWakes: which refused pending pods would pass Troupe's filter now
// (wake_planner.h, docs/kubernetes-mode.md#waking-pending-pods).
#include <algorithm>
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
  auto fits = [&](const WakeCandidate& c, int64_t queue_before) {
    const PendingPod& p = *records.at(c.uid);
    if (c.gang.empty()) {
      FilterResult r = filterSingleLocked(p.request, names);
      if (!c.queue.empty() && !r.passed.empty()) {
        holdBackLocked(c.queue, queue_before + c.milli, "", r, nullptr);
        holdForReclaimLocked(c.queue, r, nullptr);
      }
      return !r.passed.empty();
    }
    // A gang: its plan (if any) keeps a slot for each member; else its minimum members must fit
    // together, within what its queue admits for all of them.
    const GangBook::Progress progress = gangs_.progress(c.gang);
    if (progress.planned || progress.admitted) return true;
    const int need = std::max(1, p.gang_min - progress.bound);
    std::vector<const model::NodeState*> nodes;
    FilterResult r = filterSingleLocked(p.request, names, c.gang, &nodes);
    if (!c.queue.empty() && !r.passed.empty()) {
      holdBackLocked(c.queue, queue_before + std::max(1, p.gang_min) * c.milli, c.gang, r, &nodes);
      holdForReclaimLocked(c.queue, r, &nodes);
    }
    int64_t room = 0;  // members that fit, counting each node's free GPUs
    for (const model::NodeState* node : nodes) room += node->freeMilliTotal() / std::max<int64_t>(1, c.milli);
    return room >= need;
  };
  return planner.plan(std::move(candidates), fits, now(), free_milli);
}

}  // namespace troupe::sched
