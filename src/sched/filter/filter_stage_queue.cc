#include "troupe/sched/filter/filter_stage_queue.h"

#include <optional>

namespace troupe::sched {

QueuedPod queuedPod(const PodFacts& pod, const GpuRequest& req, const std::string& queue,
                    const std::string& gang, QueueClock::time_point since) {
  QueuedPod q;
  q.uid = pod.uid;
  q.key = pod.key();
  q.queue = queue;
  q.gang = gang;
  q.milli = req.totalMilli();
  q.models = req.models;
  q.priority = pod.priority;
  q.since = since;
  return q;
}

bool queueStage(FilterCycle& cycle, const FilterParts& parts) {
  if (!cycle.request.wantsGpus() || !parts.queues.enabled()) return true;
  const PodFacts& pod = cycle.pod;
  Result<QueueMembership> membership = parts.queues.membership(pod);
  if (!membership.isOk()) {
    cycle.refuseAll("troupe: queue: " + membership.status().message(), "queue");
    return false;
  }
  cycle.queue = membership.value().queue;
  parts.pending.noteQueue(pod.uid, cycle.seq, cycle.queue);
  // Standalone mode has no watch: the filter is how pending demand becomes known.
  const std::optional<QueuedPod> known = parts.queues.pod(pod.uid);
  if (!known ||
      (!known->bound() && (known->queue != cycle.queue || known->milli != cycle.request.totalMilli()))) {
    parts.queues.upsertPod(
        queuedPod(pod, cycle.request, cycle.queue, cycle.gang ? cycle.gang->key : "", parts.now()));
  }
  return true;
}

}  // namespace troupe::sched
