#include "adapters/kube/runtime/kube_runtime.h"

#include <algorithm>

#include "adapters/kube/dra/dra_objects.h"

namespace troupe::kube {

namespace {

// A change of queues or namespace defaults lists the pods again, so each pod is noted in the
// queue it belongs to now (relists are coalesced: many changes, one list). `watcher` is the
// pod watcher, created before the queue watches start.
QueueSink podsAgainOnChange(QueueSink sink, const std::unique_ptr<Watcher>& watcher) {
  sink.membership_changed = [&watcher](const std::string& why) {
    if (watcher) watcher->relistNow(why);
  };
  return sink;
}

// The runtime's sink, handed down to the parts that run their own threads.
KubeOptions withInternalErrors(KubeOptions options) {
  options.binder.internal_errors = options.internal_errors;
  options.events.internal_errors = options.internal_errors;
  options.wake.internal_errors = options.internal_errors;
  return options;
}

}  // namespace

KubeRuntime::KubeRuntime(KubeTransport& api, sched::Scheduler& scheduler, adapters::Logger& logger,
                         KubeOptions options, adapters::KubeMetrics* metrics)
    : metrics_(metrics),
      metered_(metrics ? std::make_unique<MeteredTransport>(api, *metrics) : nullptr),
      api_(metered_ ? static_cast<KubeTransport&>(*metered_) : api),
      scheduler_(scheduler),
      logger_(logger),
      options_(withInternalErrors(std::move(options))),
      seed_rng_(std::random_device{}()),
      sync_(scheduler, logger, options_.dra),
      queue_sync_(podsAgainOnChange(QueueSink::of(scheduler), pod_watcher_), logger,
                  options_.queues.default_queue),
      events_(api_, logger, options_.events),
      pod_groups_(api_, logger, options_.pod_groups),
      native_api_(api_, options_.pod_groups.no_crd_ttl),
      native_groups_(api_, logger, options_.pod_groups, {}, PodGroupApi::kNative, &native_api_),
      group_status_(api_, logger, {}, std::chrono::seconds(2), &native_api_),
      binder_(api_, scheduler, sync_, &events_, logger, options_.binder),
      active_(
          ActiveReplica::Parts{api_, scheduler, sync_, queue_sync_, events_, group_status_, logger, metrics},
          ActiveReplica::Options{
              options_.queues, options_.defrag,
              options_.queues.identity.empty() ? options_.events.instance : options_.queues.identity,
              options_.binder.scheduler_names, options_.internal_errors}),
      waker_(
          api_, [this](sched::WakePlanner& planner) { return scheduler_.planWakes(planner); },
          [this](const std::string& uid) { return sync_.pendingPod(uid).has_value(); }, logger,
          options_.wake) {
  if (metrics_) metrics_->enableKube();
  // Elastic gangs: a PodGroup's minimum changed on the watch reaches the core at once.
  pod_groups_.onMinChanged(
      [this](const std::string& key, int min) { scheduler_.setGangMinimum(key, min, /*native=*/false); });
  native_groups_.onMinChanged(
      [this](const std::string& key, int min) { scheduler_.setGangMinimum(key, min, /*native=*/true); });
  scheduler_.setGangObserver([this](const sched::GangNotice& n) {
    using Kind = sched::GangNotice::Kind;
    if (n.kind == Kind::kEnded) {
      pod_groups_.forget(n.gang);  // nothing to tell a pod: they are all gone
      native_groups_.forget(n.gang);
      return;
    }
    // A native PodGroup's condition; written later, by the active replica only.
    if (n.native && n.kind != Kind::kPlanned && n.kind != Kind::kWaiting)
      group_status_.enqueue(n.gang, n.kind == Kind::kAdmitted, n.message);
    // Nothing to tell a pod: its bind, or its next filter, says it.
    if (n.kind == Kind::kAdmitted || n.kind == Kind::kRefused) return;
    const char* reason = n.kind == Kind::kPlanned   ? "GangPlanned"
                         : n.kind == Kind::kWaiting ? "GangWaiting"
                                                    : "GangTimedOut";
    events_.podEvent(PodRef{n.pod_ns, n.pod_name, n.pod_uid},
                     n.kind == Kind::kTimedOut ? "Warning" : "Normal", reason, n.message);
  });
}

KubeRuntime::~KubeRuntime() {
  stop();
  // The Scheduler outlives the runtime: it must not call into what is destroyed next.
  scheduler_.setGangObserver(nullptr);
}

std::function<double()> KubeRuntime::makeUniform() {
  auto rng = std::make_shared<std::mt19937_64>(seed_rng_());
  return [rng]() { return std::uniform_real_distribution<double>(0.0, 1.0)(*rng); };
}

WatchConfig KubeRuntime::watchConfig(std::string name, std::string path, std::string missing_hint) const {
  WatchConfig config;
  config.name = std::move(name);
  config.path = std::move(path);
  config.page_size = options_.page_size;
  config.timeout_seconds = options_.watch_timeout_seconds;
  config.missing_hint = std::move(missing_hint);
  return config;
}

std::unique_ptr<Watcher> KubeRuntime::makeWatcher(WatchConfig config, WatchHandler& handler) {
  return std::make_unique<Watcher>(api_, std::move(config), handler, logger_, makeUniform(), metrics_,
                                   options_.internal_errors);
}

void KubeRuntime::startWatch(WatchConfig config, WatchHandler& handler) {
  threads_.emplace_back([this, watcher = makeWatcher(std::move(config), handler)] { watcher->run(stop_); });
}

void KubeRuntime::start(std::function<void()> on_ready) {
  sync_.onSynced([this, on_ready = std::move(on_ready)] {
    const ClusterSync::Stats s = sync_.stats();
    logger_.info("cluster state synced; ready", {{"nodes", std::to_string(s.nodes)},
                                                 {"gpu_pods", std::to_string(s.gpu_pods)},
                                                 {"cpu_pods", std::to_string(s.cpu_pods)},
                                                 {"unknown_index_pods", std::to_string(s.unknown_pods)},
                                                 {"orphan_pods", std::to_string(s.orphan_pods)}});
    if (on_ready) on_ready();
  });
  events_.start();
  binder_.start();

  startWatch(watchConfig("nodes", "/api/v1/nodes"), sync_.nodeHandler());
  WatchConfig pods = watchConfig("pods", "/api/v1/pods");
  // Finished pods hold nothing; a pod that finishes leaves the selection as a DELETED event.
  pods.field_selector = "status.phase!=Succeeded,status.phase!=Failed";
  pod_watcher_ = makeWatcher(std::move(pods), sync_.podHandler());
  threads_.emplace_back([this] {
    // Pods after nodes, so the first list finds every pod's node known.
    while (!sync_.nodesSynced() && !stop_.stopped()) stop_.sleepFor(std::chrono::milliseconds(20));
    pod_watcher_->run(stop_);
  });

  // DRA (docs/dra.md): which nodes a GPU DRA driver serves, and the devices claims took there.
  // Without the resource.k8s.io/v1 API (a cluster before 1.34, or DRA turned off) the watches
  // log once and keep retrying; every node is then a device-plugin node.
  const char* dra_missing =
      "the resource.k8s.io/v1 API is not served (Kubernetes before 1.34, or DRA off): DRA support is off "
      "and every node counts its device-plugin nvidia.com/gpu; nothing to do unless you use DRA";
  startWatch(watchConfig("resourceslices", kResourceSlicesPath, dra_missing), sync_.sliceHandler());
  startWatch(watchConfig("resourceclaims", kResourceClaimsPath, dra_missing), sync_.claimHandler());

  startWatch(
      watchConfig("queues", kQueuesPath,
                  "the Queue CRD (queues.troupe.dev) is not installed: install the chart's CRDs (or "
                  "deploy/), or ignore this if you use no Queues; the config file's queues apply meanwhile"),
      queue_sync_.queueHandler());
  startWatch(watchConfig("namespaces", "/api/v1/namespaces"), queue_sync_.namespaceHandler());

  // PodGroups (pod_groups.h), watched so that a changed minimum reaches the core at once. The
  // native API's version is found by discovery first (none served: asked again later).
  startWatch(
      watchConfig("podgroups", kSchedulerPluginsPodGroups,
                  "the scheduler-plugins PodGroup CRD (podgroups.scheduling.x-k8s.io) is not installed: "
                  "nothing to do unless gangs use the scheduling.x-k8s.io/pod-group label"),
      pod_groups_.watchHandler());
  threads_.emplace_back([this] { watchNativePodGroups(); });
  threads_.emplace_back([this] { active_.run(stop_); });

  if (options_.wake.enabled) {
    threads_.emplace_back([this] { waker_.run(stop_); });
  }

  threads_.emplace_back([this] {
    auto last_stats = std::chrono::steady_clock::now();
    while (stop_.sleepFor(options_.reconcile_every)) {
      adapters::guarded(logger_, options_.internal_errors, adapters::kWhereHousekeeping, "housekeeping",
                        [&] { housekeeping(last_stats); });
    }
  });
}

void KubeRuntime::watchNativePodGroups() {
  while (!stop_.stopped()) {
    const NativePodGroupApi::Served served = native_api_.served();
    if (!served.version.empty()) {
      // Until stop: the version served at start-up (an upgrade keeps serving it for at least a
      // release after a newer one comes, so a restart of Troupe then moves it on).
      makeWatcher(watchConfig("native-podgroups", served.path() + "/podgroups"),
                  native_groups_.watchHandler())
          ->run(stop_);
      return;
    }
    stop_.sleepFor(options_.pod_groups.no_crd_ttl);
  }
}

void KubeRuntime::housekeeping(std::chrono::steady_clock::time_point& last_stats) {
  // Only while a watch stream is open: a list or a backoff is not a silent watch.
  std::optional<Binder::EchoCheck> echo;
  if (auto since = pod_watcher_->watchingSince())
    echo = Binder::EchoCheck{*since, options_.watch_echo_timeout};
  if (binder_.reconcile(echo)) pod_watcher_->relistNow("stale");
  if (metrics_) {
    const ClusterSync::Stats s = sync_.stats();
    metrics_->kubeCachedObjects("nodes", static_cast<double>(s.nodes));
    metrics_->kubeCachedObjects("pods", static_cast<double>(s.gpu_pods + s.cpu_pods));
  }
  if (std::chrono::steady_clock::now() - last_stats >= options_.stats_every) {
    last_stats = std::chrono::steady_clock::now();
    const ClusterSync::Stats s = sync_.stats();
    logger_.info("cluster state", {{"nodes", std::to_string(s.nodes)},
                                   {"gpu_pods", std::to_string(s.gpu_pods)},
                                   {"cpu_pods", std::to_string(s.cpu_pods)},
                                   {"unknown_index_pods", std::to_string(s.unknown_pods)},
                                   {"orphan_pods", std::to_string(s.orphan_pods)},
                                   {"annotation_conflicts", std::to_string(s.conflicts)},
                                   {"unconfirmed_bindings", std::to_string(binder_.unconfirmedCount())},
                                   {"unwatched_bindings", std::to_string(binder_.unechoedCount())},
                                   {"events_posted", std::to_string(events_.posted())}});
  }
}

void KubeRuntime::stop() {
  stop_.stop();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
  pod_watcher_.reset();
  binder_.stop();
  events_.stop();
}

}  // namespace troupe::kube
