#include "troupe/sched/filter/filter_stage_read.h"

#include <algorithm>
#include <utility>

#include "troupe/sched/request/kueue_pods.h"

namespace troupe::sched {

bool readPodStage(FilterCycle& cycle, const FilterParts& parts) {
  const PodFacts& pod = cycle.pod;
  cycle.fingerprint = podFingerprint(pod);
  std::optional<GpuRequest> known = parts.pending.request(pod.uid, cycle.fingerprint);
  Result<GpuRequest> req =
      known ? Result<GpuRequest>(std::move(*known)) : parseGpuRequest(pod, parts.topology_levels);
  if (!req.isOk()) {
    cycle.refuseAll("troupe: " + req.status().message());
    return false;
  }
  cycle.request = std::move(req).value();
  Result<std::optional<GangSpec>> gang = parseGang(pod, parts.gang_timeout, cycle.pod_group);
  if (!gang.isOk()) {
    cycle.refuseAll("troupe: " + gang.status().message());
    return false;
  }
  cycle.gang = std::move(gang).value();
  if (cycle.gang && !cycle.gang->topology_key.empty()) {
    // A native PodGroup's topology constraint acts like troupe.dev/topology-required; with
    // both, the narrower level holds (it lies inside one domain of the wider).
    Result<int> level = gangTopologyLevel(*cycle.gang, parts.topology_levels);
    if (!level.isOk()) {
      cycle.refuseAll("troupe: " + level.status().message());
      return false;
    }
    cycle.request.topology_required = std::max(cycle.request.topology_required, level.value());
  }
  // Kueue's TAS already fixed where it runs (kueue_pods.h): Troupe only picks its GPUs there.
  cycle.kueue_placed = kueuePlaced(pod, parts.topology_levels);
  cycle.in_gang = cycle.gang && cycle.request.wantsGpus() && !cycle.kueue_placed;
  return true;
}

}  // namespace troupe::sched
