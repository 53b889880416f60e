// The Scheduler's reclaim (reclaim.h, reclaim_book.h): planning from a snapshot taken under the
// model lock, the plan in flight, and the hold that keeps the victims' nodes for the waiting
// queue meanwhile.
#include <algorithm>

#include "troupe/sched/scheduler/scheduler.h"

namespace troupe::sched {

std::optional<ReclaimPlan> Scheduler::planReclaim() {
  if (!config_.reclaim.enabled || !queues_.enabled()) return std::nullopt;
  const Clock::time_point t = now();
  // The round in flight waits for its pending pods to be bound: those the model holds GPUs for
  // (bound, or reserved by a bind) settle here, once per reclaim tick.
  // Or, as kube-scheduler may bind other pods of the queue than those the round placed, once
  // the queue holds what the round was for.
  if (std::set<std::string> unbound = reclaim_.waitingPods(); !unbound.empty()) {
    std::vector<std::string> bound;
    std::vector<QueueStatus> statuses;
    {
      std::shared_lock lock(mu_);
      for (const std::string& uid : unbound) {
        if (cluster_.nodeOf(uid)) bound.push_back(uid);
      }
      statuses = queues_.statuses();
    }
    for (const std::string& uid : bound) reclaim_.podBound(uid);
    for (const QueueStatus& q : statuses) reclaim_.queueHolds(q.spec.name, q.allocated_milli);
  }
  if (reclaim_.inFlight(t)) return std::nullopt;
  ReclaimInput in;
  in.topology_levels = config_.topology_levels;
  in.now = t;
  in.min_runtime = config_.reclaim.min_runtime;
  in.spared = reclaim_.spared(t);
  // The request filter parsed, where it has seen the pod; else the planner derives one.
  in.request = [this](const QueuedPod& p) -> std::optional<GpuRequest> {
    std::optional<PendingPod> known = pending_.find(p.uid);
    if (!known) return std::nullopt;
    return known->request;
  };
  std::optional<ReclaimPlan> plan;
  {
    std::shared_lock lock(mu_);
    in.queues = queues_.statuses();
    in.pods = queues_.pods();
    // A gang with a plan already holds its GPUs: its pending members wait for nothing more.
    std::erase_if(in.pods, [&](const QueuedPod& p) {
      if (p.bound() || p.gang.empty()) return false;
      const GangBook::Progress progress = gangs_.progress(p.gang);
      return progress.planned || progress.admitted;
    });
    cluster_.forEachNode([&](const model::NodeState& node) {
      if (node.gpuCount() > 0) in.nodes.push_back(&node);
      return true;
    });
    // By name: the plan must not depend on the model's hash order.
    std::sort(in.nodes.begin(), in.nodes.end(), [](const model::NodeState* a, const model::NodeState* b) {
      return a->info().name < b->info().name;
    });
    plan = sched::planReclaim(in);
  }
  if (!plan || !reclaim_.start(*plan, t, t + config_.reclaim.timeout)) return std::nullopt;
  return plan;
}

void Scheduler::reclaimFinished(const ReclaimPlan& plan, bool evicted, const std::string& why) {
  if (!evicted) {
    // Not carried out (a PodDisruptionBudget refused a dry run, say): its victims are spared
    // for a reclaim timeout, so the next plan looks for other pods.
    reclaim_.finish(plan);
    reclaim_.spare(plan, now() + config_.reclaim.timeout);
    return;
  }
  // The plan stays in flight until its victims are gone (forgetPod, release) or it times out.
  // Counted by a short reason, a bounded metric label: every eviction Troupe makes today gives a
  // queue back its guarantee. What happened (`why`) is the adapter's to log.
  (void)why;
  for (const ReclaimVictim& v : plan.victims) queues_.countEviction(v.queue, "guarantee");
}

}  // namespace troupe::sched
