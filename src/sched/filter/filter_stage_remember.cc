#include "troupe/sched/filter/filter_stage_remember.h"

namespace troupe::sched {

bool rememberPodStage(FilterCycle& cycle, const FilterParts& parts) {
  const PodFacts& pod = cycle.pod;
  const PendingPods::Seen seen = parts.pending.remember(pod, cycle.request, cycle.fingerprint,
                                                        cycle.in_gang ? cycle.gang->key : "", &cycle.seq);
  if (seen == PendingPods::Seen::kDeleted) {
    cycle.refuseAll("troupe: pod " + pod.key() + " (uid " + pod.uid +
                    ") was deleted; Troupe no longer schedules it");
    return false;
  }
  // By uid: the watch may have counted it already (noteWatchedDemand), or a pending record
  // dropped for room may come back as kFirst.
  if (seen == PendingPods::Seen::kFirst) parts.mix_window.record(cycle.request, pod.uid);
  return true;
}

}  // namespace troupe::sched
