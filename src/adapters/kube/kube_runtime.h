// Troupe with a Kubernetes API: the Node and Pod watches feeding the scheduling core, the
// Queue and Namespace watches feeding its queues (and, on the active replica only, the Queues'
// status writer and the reclaimer, docs/queues.md; the defragmentation advisor, docs/defrag.md), the
// binder kube-scheduler's bind verb uses, the event recorder (also for the core's gang
// notices: GangPlanned, GangWaiting, GangTimedOut on member pods), the PodGroup readers (and,
// on the active replica, the native PodGroups' PodGroupScheduled condition), and a
// housekeeping thread that settles unconfirmed bindings and checks that the pod watch is alive
// (a Binding Troupe made must show up on it; when it does not, the watch is ended and the pods
// listed again). Readiness is reported once both watches have completed their first full list
// (nodes first, then pods, so every pod finds its node). No thread it starts ends on an
// exception: each is logged and counted as an internal error, and the loop goes on.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "adapters/common/logger.h"
#include "adapters/kube/api_client.h"
#include "adapters/kube/binder.h"
#include "adapters/kube/cluster_sync.h"
#include "adapters/kube/defrag_advisor.h"
#include "adapters/kube/events.h"
#include "adapters/kube/leader_lease.h"
#include "adapters/kube/metered_transport.h"
#include "adapters/kube/pod_group_status.h"
#include "adapters/kube/pod_groups.h"
#include "adapters/kube/pod_waker.h"
#include "adapters/kube/queue_status.h"
#include "adapters/kube/queue_sync.h"
#include "adapters/kube/reclaimer.h"
#include "adapters/kube/stop_signal.h"
#include "adapters/kube/watcher.h"
#include "troupe/sched/scheduler.h"

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

struct KubeOptions {
  BinderOptions binder;
  PodGroupOptions pod_groups;
  EventOptions events;
  QueueOptions queues;
  DefragOptions defrag;  // live defragmentation advice, on the active replica (docs/defrag.md)
  DraOptions dra;        // which DRA drivers and device classes are GPUs
  // Waking the pending pods Troupe's filter refused once they would pass it (pod_waker.h).
  PodWakeOptions wake;
  int watch_timeout_seconds = 300;  // sent as timeoutSeconds (+0-25%): the server ends each watch
  int page_size = 500;
  std::chrono::milliseconds reconcile_every{2000};
  // Watch liveness: a Binding Troupe created that the pod watch has not shown this long after
  // it (and after the stream opened) makes Troupe read the pod; if it is bound, the watch is
  // stale: ended and the pods listed again. 0 turns the check off.
  std::chrono::milliseconds watch_echo_timeout{10000};
  std::chrono::seconds stats_every{60};
  // Where exceptions caught on the runtime's threads are counted (troupe_internal_errors_total):
  // passed on to the watchers, the binder and the event poster too.
  adapters::InternalErrors internal_errors;
};

class KubeRuntime {
 public:
  // `api` is shared by everything the runtime starts; it must outlive the runtime, and so must
  // `metrics` when given (API calls, watch and cache health are then reported there).
  KubeRuntime(KubeTransport& api, sched::Scheduler& scheduler, adapters::Logger& logger,
              KubeOptions options = {}, adapters::KubeMetrics* metrics = nullptr);
  ~KubeRuntime();
  KubeRuntime(const KubeRuntime&) = delete;
  KubeRuntime& operator=(const KubeRuntime&) = delete;

  // Starts the watches, the binder and the housekeeping; `on_ready` runs once, on a watcher
  // thread, after the first full sync.
  void start(std::function<void()> on_ready);
  void stop();

  Binder& binder() { return binder_; }
  // Reads a gang's PodGroup through the runtime's cache (it may wait on the API server), for
  // the extender's filter to call before the core; valid while the runtime lives.
  sched::PodGroupLookup podGroupLookup() {
    return [this](const std::string& ns, const std::string& name) { return pod_groups_.lookup(ns, name); };
  }
  // The same for native PodGroups (scheduling.k8s.io, spec.schedulingGroup).
  sched::PodGroupLookup nativePodGroupLookup() {
    return [this](const std::string& ns, const std::string& name) { return native_groups_.lookup(ns, name); };
  }
  ClusterSync& sync() { return sync_; }
  QueueSync& queueSync() { return queue_sync_; }
  // The pod watcher, while started.
  Watcher* podWatcher() { return pod_watcher_.get(); }

 private:
  std::function<double()> makeUniform();
  // One round of the housekeeping thread: settle bindings, check the pod watch, cache gauges.
  void housekeeping(std::chrono::steady_clock::time_point& last_stats);
  // The queue loop: the leader check, then (active only) status writes and reclaims, each on
  // its own period.
  void queueRound(std::chrono::steady_clock::time_point& last_status,
                  std::chrono::steady_clock::time_point& last_reclaim,
                  std::chrono::steady_clock::time_point& last_lease);
  // The pending pods a reclaim plan is for, for its Events.
  std::vector<PodRef> waitingPods(const std::string& for_key) const;

  adapters::KubeMetrics* metrics_;
  std::unique_ptr<MeteredTransport> metered_;  // wraps the caller's transport when metrics are on
  KubeTransport& api_;
  sched::Scheduler& scheduler_;
  adapters::Logger& logger_;
  const KubeOptions options_;
  std::mt19937_64 seed_rng_;

  ClusterSync sync_;
  QueueSync queue_sync_;
  EventRecorder events_;
  PodGroupCache pod_groups_;
  NativePodGroupApi native_api_;  // which scheduling.k8s.io version serves PodGroups
  PodGroupCache native_groups_;
  PodGroupStatusWriter group_status_;  // PodGroupScheduled, written by the queue thread
  Binder binder_;
  LeaderCheck leader_;
  QueueStatusWriter status_writer_;
  Reclaimer reclaimer_;
  DefragAdvisor defrag_;
  PodWaker waker_;
  std::chrono::steady_clock::time_point last_defrag_{};  // the queue thread's only
  std::unique_ptr<Watcher> pod_watcher_;  // reached by the housekeeping thread's liveness check
  StopSignal stop_;
  std::vector<std::thread> threads_;
};

}  // namespace troupe::kube
