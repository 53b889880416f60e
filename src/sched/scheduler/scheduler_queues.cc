// The Scheduler's queues (queue_book.h, docs/queues.md): the tree, namespace defaults, the pods
// the watch notes, statuses, and the periodic refresh of fair shares. Reclaims are in
// scheduler_reclaim.cc; the filter's queue stages in filter_stage_queue.cc and
// filter_stage_hold.cc.
#include <optional>
#include <utility>

#include "troupe/sched/filter/filter_stage_queue.h"
#include "troupe/sched/request/kueue_pods.h"
#include "troupe/sched/scheduler/scheduler.h"
#include "troupe/sched/score/placement.h"

namespace troupe::sched {

void Scheduler::setQueues(QueueTree tree) {
  queues_.setQueues(std::move(tree));
  refreshQueues(true);
}

void Scheduler::setNamespaceQueue(const std::string& ns, const std::string& queue) {
  queues_.setNamespaceDefault(ns, queue);
}

void Scheduler::notePod(const PodFacts& pod, QueueClock::time_point since,
                        const std::optional<GpuRequest>* parsed) {
  if (pod.uid.empty() || !queues_.enabled()) return;
  Result<GpuRequest> req = !parsed ? parseGpuRequest(pod, config_.topology_levels)
                           : *parsed
                               ? Result<GpuRequest>(**parsed)
                               : Result<GpuRequest>(invalidArgument("the pod's request does not parse"));
  Result<QueueMembership> membership = queues_.membership(pod);
  const bool finished = pod.phase == "Succeeded" || pod.phase == "Failed";
  // A gated pod (e.g. held by Kueue until its workload is admitted) is no demand yet.
  const bool gated = pod.node_name.empty() && schedulingGated(pod);
  if (finished || gated || !req.isOk() || !req.value().wantsGpus() || !membership.isOk() ||
      pending_.deleted(pod.uid)) {
    queues_.removePod(pod.uid);  // a pod whose request or queue is invalid is not counted
    return;
  }
  // Without its PodGroup object (not read here) a native member's size is unknown, but its
  // gang is not: keep it with its gang for reclaims.
  Result<std::optional<GangSpec>> gang = parseGang(pod, config_.gang.timeout);
  const std::string gang_key = gang.isOk()                    ? (gang.value() ? gang.value()->key : "")
                               : pod.scheduling_group.empty() ? ""
                                                              : gangKeyOf(pod);
  QueuedPod q = queuedPod(pod, req.value(), membership.value().queue, gang_key, since);
  std::shared_lock lock(mu_);
  // Where its GPUs are: the model knows a reservation before the API shows the binding.
  const std::string* held = cluster_.nodeOf(pod.uid);
  q.node = held ? *held : pod.node_name;
  if (const model::NodeState* node = q.node.empty() ? nullptr : cluster_.find(q.node)) {
    q.product = node->info().gpu_product;
  }
  queues_.upsertPod(std::move(q));
}

std::vector<QueueStatus> Scheduler::queueStatuses() const { return queues_.statuses(); }

void Scheduler::markBoundLocked(const std::vector<Completion>& completions) {
  for (const Completion& c : completions) {
    if (!c.second.isOk()) continue;
    const model::Allocation& a = c.second.value();
    const model::NodeState* node = cluster_.find(a.node);
    queues_.markBound(a.pod_uid, a.node, node ? node->info().gpu_product : "", now());
  }
}

void Scheduler::refreshQueues(bool force) {
  if (!queues_.enabled()) return;
  {
    const Clock::time_point t = now();
    std::lock_guard lock(queue_refresh_mu_);
    if (!force && queues_refreshed_ != Clock::time_point{} && t - queues_refreshed_ < config_.queue_refresh)
      return;
    queues_refreshed_ = t;
  }
  std::shared_lock lock(mu_);
  ProductMilli capacity;
  cluster_.forEachNode([&](const model::NodeState& node) {
    if (!node.info().unschedulable && node.gpuCount() > 0) {
      capacity[node.info().gpu_product] += node.gpuCount() * model::kMilliPerGpu;
    }
    return true;
  });
  queues_.refresh(capacity, [&](const QueuedPod& p) {
    // The request filter parsed, else one rebuilt from the book's numbers.
    GpuRequest req;
    if (std::optional<PendingPod> known = pending_.find(p.uid)) {
      req = known->request;
    } else if (p.milli < model::kMilliPerGpu) {
      req.gpus = 1;
      req.milli_per_gpu = p.milli;
      req.models = p.models;
    } else {
      req.gpus = static_cast<int>(p.milli / model::kMilliPerGpu);
      req.models = p.models;
    }
    bool fits = false;
    cluster_.forEachNode([&](const model::NodeState& node) {
      fits = !node.info().unschedulable && findMisfit(node, req) == Misfit::kNone;
      return !fits;
    });
    return fits;
  });
}

}  // namespace troupe::sched
