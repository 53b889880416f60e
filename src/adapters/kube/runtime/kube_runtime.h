// Troupe with a Kubernetes API; the kube adapter's composition root. It builds and starts the
// Node and Pod watches feeding the scheduling core, the Queue and Namespace watches feeding its
// queues, the DRA watches (docs/dra.md), the binder kube-scheduler's bind verb uses, the event
// recorder (also for the core's gang notices: GangPlanned, GangWaiting, GangTimedOut on member
// pods), the PodGroup readers, the active replica's loop (active_replica.h: the Lease, the
// Queues' status, the reclaimer, the native PodGroups' PodGroupScheduled condition and the
// defragmentation advisor), the pod waker, and a housekeeping thread that settles unconfirmed
// bindings and checks that the pod watch is alive (a Binding Troupe made must show up on it;
// when it does not, the watch is ended and the pods listed again). Readiness is reported once
// both watches have completed their first full list (nodes first, then pods, so every pod
// finds its node). No thread it starts ends on an exception: each is logged and counted as an
// internal error, and the loop goes on.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "adapters/common/logger.h"
#include "adapters/kube/bind/binder.h"
#include "adapters/kube/bind/events.h"
#include "adapters/kube/client/api_client.h"
#include "adapters/kube/client/metered_transport.h"
#include "adapters/kube/podgroups/pod_group_status.h"
#include "adapters/kube/podgroups/pod_groups.h"
#include "adapters/kube/queues/pod_waker.h"
#include "adapters/kube/queues/queue_sync.h"
#include "adapters/kube/replica/active_replica.h"
#include "adapters/kube/runtime/stop_signal.h"
#include "adapters/kube/watch/cluster_sync.h"
#include "adapters/kube/watch/watcher.h"
#include "troupe/sched/scheduler/scheduler.h"

namespace troupe::kube {

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
  // A watch of `path` with the runtime's page size and timeout; `missing_hint` is logged when
  // the API does not serve it (an optional API or CRD).
  WatchConfig watchConfig(std::string name, std::string path, std::string missing_hint = {}) const;
  // A watcher feeding `handler`, with the runtime's metrics and error sink.
  std::unique_ptr<Watcher> makeWatcher(WatchConfig config, WatchHandler& handler);
  // Runs makeWatcher's watcher on a thread of its own until stop().
  void startWatch(WatchConfig config, WatchHandler& handler);
  // Watches the native PodGroups once discovery finds the version that serves them.
  void watchNativePodGroups();
  // One round of the housekeeping thread: settle bindings, check the pod watch, cache gauges.
  void housekeeping(std::chrono::steady_clock::time_point& last_stats);

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
  ActiveReplica active_;  // the lease, and what only the active replica does
  PodWaker waker_;
  std::unique_ptr<Watcher> pod_watcher_;  // reached by the housekeeping thread's liveness check
  StopSignal stop_;
  std::vector<std::thread> threads_;
};

}  // namespace troupe::kube
