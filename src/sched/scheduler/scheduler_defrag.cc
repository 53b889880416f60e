// The Scheduler's defragmentation advice (defrag_advice.h): the planner on a snapshot of the
// GPU nodes, taken under the model lock (shared: filters go on meanwhile).
#include <algorithm>

#include "troupe/sched/scheduler/scheduler.h"

namespace troupe::sched {

DefragAdvice Scheduler::adviseDefrag(const DefragAsk& ask, std::set<std::string> pinned,
                                     int max_moves) const {
  DefragInput in;
  in.policy = &*config_.policy;
  in.max_moves = max_moves;
  in.topology_levels = config_.topology_levels;
  const std::shared_ptr<const RequestMix> mix = mix_window_.current();
  in.context = ScoreContext{mix.get(), nullptr};
  std::shared_lock lock(mu_);
  if (!ask.key.empty() && ask.members > 1) {
    const GangBook::Progress progress = gangs_.progress(ask.key);
    if (progress.planned || progress.admitted)
      return DefragAdvice{DefragAdvice::Outcome::kFitsNow, {}, 0, 0, ""};
  }
  // Holds of pods between filter and bind are the caller's to pin (it knows which pods are
  // unbound; PendingPods keeps a record past the bind); a gang's planned slots are gang holds.
  cluster_.forEachNode([&](const model::NodeState& node) {
    if (node.gpuCount() > 0) in.nodes.push_back(&node);
    return true;
  });
  // By name: the advice must not depend on the model's hash order.
  std::sort(in.nodes.begin(), in.nodes.end(), [](const model::NodeState* a, const model::NodeState* b) {
    return a->info().name < b->info().name;
  });
  in.pinned = std::move(pinned);
  return planDefragAdvice(ask, in);
}

}  // namespace troupe::sched
