#include "adapters/kube/replica/active_replica.h"

#include <algorithm>

namespace troupe::kube {

ActiveReplica::ActiveReplica(Parts parts, Options options)
    : parts_(parts),
      options_(std::move(options)),
      leader_(parts.api, parts.logger, options_.queues.leader_lease, options_.identity),
      status_writer_(
          parts.api, [this] { return parts_.scheduler.queueStatuses(); }, parts.logger,
          [this] { return parts_.queue_sync.queueObjects(); }),
      reclaimer_(parts.api, ReclaimCore::of(parts.scheduler), &parts.events, parts.logger,
                 [this](const std::string& key) { return waitingPods(key); }),
      defrag_(parts.api,
              DefragCore{[this] { return defragPending(); },
                         [this](const sched::DefragAsk& ask, std::set<std::string> pinned, int max_moves) {
                           return parts_.scheduler.adviseDefrag(ask, std::move(pinned), max_moves);
                         }},
              &parts.events, parts.logger, options_.defrag, parts.metrics) {}

void ActiveReplica::run(StopSignal& stop) {
  const auto tick = std::min({options_.queues.status_every, options_.queues.reclaim_every,
                              options_.queues.lease_every, std::chrono::milliseconds(1000)});
  while (stop.sleepFor(tick)) {
    adapters::guarded(parts_.logger, options_.internal_errors, adapters::kWhereHousekeeping,
                      "queue status and reclaim", [&] { round(std::chrono::steady_clock::now()); });
  }
}

void ActiveReplica::round(std::chrono::steady_clock::time_point now) {
  if (now - last_lease_ >= options_.queues.lease_every) {
    last_lease_ = now;
    const bool was = leader_.active();
    if (!leader_.refresh() && was) status_writer_.reset();
  }
  // PodGroup conditions (every tick, so that they follow the binds closely), like the
  // queues' status only from the active replica.
  if (leader_.active()) {
    parts_.group_status.flush();
  } else {
    parts_.group_status.drop();
  }
  // Both wait for the first full sync: a half-listed cluster would look like idle queues.
  if (!leader_.active() || !parts_.sync.synced()) return;
  if (now - last_reclaim_ >= options_.queues.reclaim_every) {
    last_reclaim_ = now;
    reclaimer_.runOnce();
  }
  if (now - last_status_ >= options_.queues.status_every) {
    last_status_ = now;
    status_writer_.writeOnce();
  }
  if (options_.defrag.enabled && now - last_defrag_ >= options_.defrag.interval) {
    last_defrag_ = now;
    defrag_.runOnce();
  }
}

std::vector<PodRef> ActiveReplica::waitingPods(const std::string& for_key) const {
  std::vector<PodRef> out;
  for (const auto& [uid, pod] : parts_.sync.pendingFor(for_key, 64))
    out.push_back(PodRef{pod.ns, pod.name, uid});
  return out;
}

std::vector<std::pair<std::string, ClusterSync::PendingPod>> ActiveReplica::defragPending() const {
  // Only pods of Troupe's profiles: the others are not its to place.
  auto pods = parts_.sync.pendingPods();
  const std::vector<std::string>& names = options_.scheduler_names;
  std::erase_if(pods, [&](const auto& p) {
    return !names.empty() && std::find(names.begin(), names.end(), p.second.scheduler_name) == names.end();
  });
  return pods;
}

}  // namespace troupe::kube
