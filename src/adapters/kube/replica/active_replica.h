// What only the active replica does (docs/queues.md, docs/defrag.md), on one thread: it checks
// kube-scheduler's leader-election Lease (--leader-lease; without one it is always active) and,
// while active and once the cluster is synced, writes the Queues' status, reclaims GPUs for
// queues below their guarantee and advises defragmentation, each on its own period. The
// native PodGroups' conditions the gang observer queued are written (active) or dropped
// (standby) every tick, so they follow the binds closely. A replica that loses the Lease
// forgets what status it wrote: the next active one may write something else meanwhile.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "adapters/common/internal_errors.h"
#include "adapters/common/logger.h"
#include "adapters/kube/bind/events.h"
#include "adapters/kube/client/api_client.h"
#include "adapters/kube/client/metered_transport.h"
#include "adapters/kube/defrag/defrag_advisor.h"
#include "adapters/kube/podgroups/pod_group_status.h"
#include "adapters/kube/queues/queue_status.h"
#include "adapters/kube/queues/queue_sync.h"
#include "adapters/kube/queues/reclaimer.h"
#include "adapters/kube/replica/leader_lease.h"
#include "adapters/kube/runtime/stop_signal.h"
#include "adapters/kube/watch/cluster_sync.h"
#include "troupe/sched/scheduler/scheduler.h"

namespace troupe::kube {

// Queues in Kubernetes mode.
struct QueueOptions {
  std::string default_queue = sched::kDefaultQueueName;  // queues.default of the config
  // kube-scheduler's leader-election Lease (--leader-lease): only the replica whose host holds
  // it writes status and reclaims. None: always active (one replica).
  std::optional<LeaseRef> leader_lease;
  std::string identity;  // this host's name; events.instance when empty
  std::chrono::milliseconds status_every{5000};
  std::chrono::milliseconds reclaim_every{2000};
  std::chrono::milliseconds lease_every{2000};
};

class ActiveReplica {
 public:
  // What the active replica reads and writes through; all must outlive it.
  struct Parts {
    KubeTransport& api;
    sched::Scheduler& scheduler;
    const ClusterSync& sync;
    const QueueSync& queue_sync;
    EventRecorder& events;
    PodGroupStatusWriter& group_status;  // filled by the gang observer, written here
    adapters::Logger& logger;
    adapters::KubeMetrics* metrics = nullptr;
  };
  struct Options {
    QueueOptions queues;
    DefragOptions defrag;
    std::string identity;                      // this host's name, for the Lease
    std::vector<std::string> scheduler_names;  // defrag advises only pods of these profiles
    adapters::InternalErrors internal_errors;
  };
  ActiveReplica(Parts parts, Options options);
  ActiveReplica(const ActiveReplica&) = delete;
  ActiveReplica& operator=(const ActiveReplica&) = delete;

  // The loop, until `stop`: a round every tick (the shortest period, at most a second).
  void run(StopSignal& stop);
  // One round at `now`: the Lease, the PodGroup conditions, then (active and synced) whatever
  // is due. The first round does everything.
  void round(std::chrono::steady_clock::time_point now);
  bool active() const { return leader_.active(); }

 private:
  // The pending pods a reclaim plan is for, for its Events.
  std::vector<PodRef> waitingPods(const std::string& for_key) const;
  // Troupe's pending pods the defragmentation advice plans for.
  std::vector<std::pair<std::string, ClusterSync::PendingPod>> defragPending() const;

  Parts parts_;
  const Options options_;
  LeaderCheck leader_;
  QueueStatusWriter status_writer_;
  Reclaimer reclaimer_;
  DefragAdvisor defrag_;
  // When each duty last ran; far in the past, so the first round does everything.
  std::chrono::steady_clock::time_point last_status_{}, last_reclaim_{}, last_lease_{}, last_defrag_{};
};

}  // namespace troupe::kube
