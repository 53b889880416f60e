#include "adapters/metrics/metrics.h"

#include <prometheus/text_serializer.h>

#include <chrono>
#include <unordered_set>

#include "adapters/metrics/node_gpus_text.h"

namespace troupe::metrics {
namespace {

prometheus::Histogram::BucketBoundaries latencyBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
          0.1,    0.25,    0.5,    1,     2.5,    5,     10,   30};
}

// The families of one metric, registered in the order they are built (the order /metrics lists them).
prometheus::Family<prometheus::Counter>& counters(prometheus::Registry& registry, const char* name,
                                                  const char* help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry);
}

prometheus::Family<prometheus::Gauge>& gauges(prometheus::Registry& registry, const char* name,
                                              const char* help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry);
}

prometheus::Family<prometheus::Histogram>& histograms(prometheus::Registry& registry, const char* name,
                                                      const char* help) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(registry);
}

}  // namespace

Metrics::Metrics(const std::string& version, adapters::PerNodeSeries per_node)
    : per_node_(per_node),
      registry_(std::make_shared<prometheus::Registry>()),
      request_duration_(histograms(*registry_, "troupe_extender_request_duration_seconds",
                                   "Time Troupe spent answering one kube-scheduler extender call, by verb.")),
      requests_(counters(*registry_, "troupe_extender_requests_total",
                         "Extender calls answered, by verb and outcome (ok, error, bad_request).")),
      rejections_(counters(*registry_, "troupe_filter_rejections_total",
                           "Nodes rejected by Troupe's filter, by reason category.")),
      placements_(counters(
          *registry_, "troupe_pods_placed_total",
          "Pods whose GPUs Troupe assigned, by whether the GPU set is the best-connected possible.")),
      topology_quality_(histograms(*registry_, "troupe_placement_topology_quality_ratio",
                                   "Bottleneck bandwidth of the assigned GPU set relative to the best the "
                                   "node allows (1 = best).")),
      gpus_(gauges(*registry_, "troupe_gpus",
                   "GPUs in Troupe's model, by product and state (total, allocated, shared, free).")),
      nodes_(gauges(*registry_, "troupe_nodes", "GPU nodes in Troupe's model, by product.")),
      fragmented_(gauges(*registry_, "troupe_fragmented_gpus",
                         "Free GPUs stranded on nodes with fewer free GPUs than the node's largest "
                         "power-of-two request size.")
                      .Add({})),
      pending_(
          gauges(*registry_, "troupe_pending_pods", "Pods filtered by Troupe and not yet bound.").Add({})),
      pods_(gauges(*registry_, "troupe_gpu_pods", "Pods holding GPUs in Troupe's model.").Add({})),
      gangs_(gauges(*registry_, "troupe_gangs",
                    "Gangs Troupe tracks, by state: waiting (nothing held), planned (GPUs held, members "
                    "binding), admitted.")),
      gang_held_gpus_(gauges(*registry_, "troupe_gang_reserved_gpus",
                             "GPUs held for planned gangs whose members are not all bound yet.")
                          .Add({})),
      draining_nodes_(
          gauges(*registry_, "troupe_gang_draining_nodes",
                 "Nodes kept free of new pods for a gang that has waited past the starvation threshold.")
              .Add({})),
      gang_admit_seconds_(
          histograms(*registry_, "troupe_gang_time_to_admit_seconds",
                     "Time from a gang's first member reaching Troupe to all of its minimum members bound.")
              .Add({}, prometheus::Histogram::BucketBoundaries{0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600,
                                                               1800})),
      gang_timeouts_(counters(*registry_, "troupe_gang_timeouts_total",
                              "Gang bind barriers that timed out before all members arrived (the gang is "
                              "released and planned again).")
                         .Add({})),
      node_series_exported_(gauges(*registry_, "troupe_node_series_exported",
                                   "1 while the per-node series (troupe_node_gpus) are exported, 0 while "
                                   "metrics.perNodeSeries keeps them off (auto: at 1,000 GPU nodes and "
                                   "more, by default).")
                                .Add({})),
      node_scores_(counters(*registry_, "troupe_filter_node_scores_total",
                            "Node values filter ranked for narrowTo: best, by source: remembered from an "
                            "earlier call for the same pod shape and node state, or computed.")),
      scores_remembered_(node_scores_.Add({{"source", "remembered"}})),
      scores_computed_(node_scores_.Add({{"source", "computed"}})),
      kube_last_sync_(gauges(*registry_, "troupe_kube_last_sync_timestamp_seconds",
                             "Unix time when Troupe's cache of a resource was last known current (list "
                             "completed, watch event or bookmark received).")),
      kube_relists_(counters(*registry_, "troupe_kube_relists_total",
                             "Full lists of a resource after the first (410 Gone, expired continue token).")),
      kube_watch_restarts_(counters(*registry_, "troupe_kube_watch_restarts_total",
                                    "Watches that ended and were reopened, by reason: closed (server "
                                    "timeout), gone (410, relist), error, stale (open but silent: a "
                                    "binding Troupe made did not show up; relist).")),
      kube_api_calls_(
          counters(*registry_, "troupe_kube_api_requests_total",
                   "Calls to the Kubernetes API server, by verb and code (HTTP status, or "
                   "Unreachable / ConnectionLost without a response); errors are code!~\"2..\".")),
      kube_cached_(gauges(*registry_, "troupe_kube_cached_objects",
                          "Objects in Troupe's API caches, by resource (pods: bound pods holding GPUs, "
                          "and other bound pods on GPU nodes).")),
      internal_errors_(
          counters(*registry_, "troupe_internal_errors_total",
                   "Unexpected exceptions caught instead of ending the process, by where: watch, "
                   "binder, events, housekeeping, ticker, http. Anything above 0 is a bug to "
                   "report; the log line says what failed.")),
      connections_closed_(
          counters(*registry_, "troupe_http_connections_closed_total",
                   "HTTP connections Troupe closed on its own, by port (verbs, metrics) and reason: "
                   "evicted_new, evicted_started, evicted_idle (closed to make room at "
                   "limits.maxConnections: no byte sent, a header begun, idle longest), refused "
                   "(at the cap with every connection mid-request), header_timeout, read_timeout, "
                   "idle_timeout, write_timeout.")),
      accept_errors_(counters(*registry_, "troupe_http_accept_errors_total",
                              "Failed accepts on an HTTP port (verbs, metrics), such as no file "
                              "descriptors left; the acceptor pauses 100 ms and tries again.")),
      defrag_pending_(gauges(*registry_, "troupe_defrag_advice_pending_pods",
                             "Pending pods (a gang counts once) for which moving running pods would make "
                             "room, as of the last defragmentation round (docs/defrag.md).")
                          .Add({})),
      defrag_gpus_(gauges(*registry_, "troupe_defrag_advice_gpus",
                          "GPUs the current defragmentation plans would free, summed over the nodes "
                          "they free.")
                       .Add({})),
      defrag_moves_(gauges(*registry_, "troupe_defrag_advice_moves",
                           "Moves of running pods the current defragmentation plans take.")
                        .Add({})),
      defrag_evictions_(counters(*registry_, "troupe_defrag_evictions_total",
                                 "Running pods evicted for a defragmentation plan (only with "
                                 "defrag.evict: true).")
                            .Add({})),
      queue_series_(*registry_) {
  gauges(*registry_, "troupe_build_info", "Troupe's version; always 1.").Add({{"version", version}}).Set(1);
  for (const char* where : {"watch", "binder", "events", "housekeeping", "ticker", "http"}) {
    internal_errors_.Add({{"where", where}});
  }
  for (const char* verb : {"filter", "prioritize", "bind", "preempt"}) {
    request_duration_.Add({{"verb", verb}}, latencyBuckets());
    requests_.Add({{"verb", verb}, {"outcome", "ok"}});
  }
}

void Metrics::observeRequest(const std::string& verb, const std::string& outcome, double seconds) {
  request_duration_.Add({{"verb", verb}}, latencyBuckets()).Observe(seconds);
  requests_.Add({{"verb", verb}, {"outcome", outcome}}).Increment();
}

void Metrics::countRejections(const std::map<std::string, int>& categories) {
  for (const auto& [category, count] : categories) {
    rejections_.Add({{"category", category}}).Increment(count);
  }
}

void Metrics::observePlacement(double topology_quality, bool best_possible) {
  placements_.Add({{"topology", best_possible ? "best" : "degraded"}}).Increment();
  topology_quality_.Add({}, prometheus::Histogram::BucketBoundaries{0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1.0})
      .Observe(topology_quality);
}

void Metrics::refreshCluster(sched::ClusterSummary s) {
  std::lock_guard lock(cluster_mu_);
  std::unordered_set<std::string> products;
  for (const sched::ClusterSummary::Row& r : s.by_product) {
    products.insert(r.product);
    ProductSeries& series = product_series_[r.product];
    if (series.total == nullptr) {
      series.total = &gpus_.Add({{"product", r.product}, {"state", "total"}});
      series.allocated = &gpus_.Add({{"product", r.product}, {"state", "allocated"}});
      series.shared = &gpus_.Add({{"product", r.product}, {"state", "shared"}});
      series.free = &gpus_.Add({{"product", r.product}, {"state", "free"}});
      series.nodes = &nodes_.Add({{"product", r.product}});
    }
    series.total->Set(r.gpus);
    series.allocated->Set(static_cast<double>(r.used_milli) / 1000.0);
    series.shared->Set(r.shared_gpus);
    series.free->Set(r.whole_free);
    series.nodes->Set(r.nodes);
  }
  for (auto it = product_series_.begin(); it != product_series_.end();) {
    if (products.count(it->first)) {
      ++it;
      continue;
    }
    for (prometheus::Gauge* g : {it->second.total, it->second.allocated, it->second.shared, it->second.free})
      gpus_.Remove(g);
    nodes_.Remove(it->second.nodes);
    it = product_series_.erase(it);
  }
  size_t gpu_nodes = 0;
  for (const sched::ClusterSummary::Row& r : s.by_product) gpu_nodes += static_cast<size_t>(r.nodes);
  const bool per_node = per_node_.exportedFor(gpu_nodes) && !s.node_rows_omitted;
  node_series_exported_.Set(per_node ? 1 : 0);
  // Nodes that left the model leave the rows with it; off, there are none.
  node_rows_ = per_node ? std::move(s.by_node) : std::vector<sched::ClusterSummary::NodeRow>{};
  fragmented_.Set(s.fragmented_gpus);
  gangs_.Add({{"state", "waiting"}}).Set(s.gangs.waiting);
  gangs_.Add({{"state", "planned"}}).Set(s.gangs.planned);
  gangs_.Add({{"state", "admitted"}}).Set(s.gangs.admitted);
  gang_held_gpus_.Set(s.gangs.held_gpus);
  draining_nodes_.Set(s.gangs.draining_nodes);
  pending_.Set(s.pending);
  pods_.Set(s.pods);
  // The Scheduler counts from its start; the counters take what is new since the last refresh.
  if (s.scores_remembered > scores_remembered_seen_) {
    scores_remembered_.Increment(static_cast<double>(s.scores_remembered - scores_remembered_seen_));
    scores_remembered_seen_ = s.scores_remembered;
  }
  if (s.scores_computed > scores_computed_seen_) {
    scores_computed_.Increment(static_cast<double>(s.scores_computed - scores_computed_seen_));
    scores_computed_seen_ = s.scores_computed;
  }
}

void Metrics::refreshQueues(const std::vector<sched::QueueStatus>& statuses) {
  std::lock_guard lock(cluster_mu_);
  queue_series_.refresh(statuses);
}

void Metrics::observeGangEvents(const sched::Scheduler::GangEvents& events) {
  for (double seconds : events.admit_seconds) gang_admit_seconds_.Observe(seconds);
  if (events.timeouts > 0) gang_timeouts_.Increment(events.timeouts);
}

void Metrics::enableKube() {
  for (const char* resource : {"nodes", "pods"}) {
    kube_relists_.Add({{"resource", resource}});
    for (const char* reason : {"closed", "gone", "error", "stale"}) {
      kube_watch_restarts_.Add({{"resource", resource}, {"reason", reason}});
    }
    kube_cached_.Add({{"resource", resource}});
  }
}

void Metrics::kubeSynced(const std::string& resource) {
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  kube_last_sync_.Add({{"resource", resource}}).Set(now);
}

void Metrics::kubeRelist(const std::string& resource) {
  kube_relists_.Add({{"resource", resource}}).Increment();
}

void Metrics::kubeWatchRestart(const std::string& resource, const std::string& reason) {
  kube_watch_restarts_.Add({{"resource", resource}, {"reason", reason}}).Increment();
}

void Metrics::kubeApiCall(const std::string& verb, const std::string& code) {
  kube_api_calls_.Add({{"verb", verb}, {"code", code}}).Increment();
}

void Metrics::kubeCachedObjects(const std::string& resource, double count) {
  kube_cached_.Add({{"resource", resource}}).Set(count);
}

void Metrics::defragAdvice(double pending_pods, double gpus, double moves) {
  defrag_pending_.Set(pending_pods);
  defrag_gpus_.Set(gpus);
  defrag_moves_.Set(moves);
}

void Metrics::defragEvicted(double pods) { defrag_evictions_.Increment(pods); }

void Metrics::internalError(const std::string& where) {
  internal_errors_.Add({{"where", where}}).Increment();
}

adapters::ConnectionEvents Metrics::connectionEvents(const std::string& port) {
  // The counters are made once here; a count is then one atomic add, even during a flood.
  auto closed = std::make_shared<std::unordered_map<std::string, prometheus::Counter*>>();
  for (const char* reason : adapters::kConnectionCloseReasons) {
    (*closed)[reason] = &connections_closed_.Add({{"port", port}, {"reason", reason}});
  }
  prometheus::Counter* accept_errors = &accept_errors_.Add({{"port", port}});
  return adapters::ConnectionEvents(
      [closed, this, port](const std::string& reason) {
        auto it = closed->find(reason);
        (it != closed->end() ? *it->second : connections_closed_.Add({{"port", port}, {"reason", reason}}))
            .Increment();
      },
      [accept_errors] { accept_errors->Increment(); });
}

std::string Metrics::serialize() {
  std::string text = prometheus::TextSerializer().Serialize(registry_->Collect());
  std::lock_guard lock(cluster_mu_);
  appendNodeGpus(node_rows_, text);
  return text;
}

}  // namespace troupe::metrics
