// Troupe's Prometheus metrics (prometheus-cpp), one declared list for the whole service.
//
// Names follow Prometheus conventions: troupe_ prefix, base units (_seconds), _total on
// counters. Labels are bounded sets (verb, outcome, category, product, node, resource, code,
// queue): never pod names. Node names are bounded by the cluster's size (3 series per GPU node, only
// while PerNodeSeries says so), and product and node series go when their product or node
// leaves the model, so label values taken from node facts never pile up.
// Thread-safe: prometheus-cpp metrics are atomic; refreshCluster() and serialize() take
// cluster_mu_ for the per-node rows and the per-product series.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "adapters/common/connection_events.h"
#include "adapters/common/extender_metrics.h"
#include "adapters/common/kube_metrics.h"
#include "adapters/common/per_node_series.h"
#include "adapters/metrics/queue_series.h"
#include "troupe/sched/scheduler/scheduler.h"

namespace troupe::metrics {

// The HTTP handler and the kube adapter see it through their interfaces (adapters/common/
// extender_metrics.h, kube_metrics.h), which say what each call means.
class Metrics final : public adapters::ExtenderMetrics, public adapters::KubeMetrics {
 public:
  explicit Metrics(const std::string& version, adapters::PerNodeSeries per_node = {});

  // What refreshCluster can use of Scheduler::summary's per-node rows (its max_node_rows).
  size_t maxNodeRows() const override { return per_node_.maxNodeRows(); }

  void observeRequest(const std::string& verb, const std::string& outcome, double seconds) override;
  void countRejections(const std::map<std::string, int>& categories) override;
  void observePlacement(double topology_quality, bool best_possible) override;
  // Gang admissions (time from first sight to all members bound) and barrier timeouts.
  void observeGangEvents(const sched::Scheduler::GangEvents& events) override;
  // Snapshot gauges from the scheduler's model; called before each scrape. Per-node series of
  // nodes that left the model, and per-product series of products no node has any more, are
  // removed; so are all per-node series when PerNodeSeries turns them off for the summary's
  // GPU node count (or the summary omitted its node rows).
  // Takes the summary by value to keep its node rows without copying them.
  void refreshCluster(sched::ClusterSummary summary) override;
  // Per-queue series (queue_series.h); those of queues that are gone are removed.
  void refreshQueues(const std::vector<sched::QueueStatus>& statuses) override;

  // Kubernetes mode: the health of the API watches and caches (resource: nodes | pods).
  void enableKube() override;
  void kubeSynced(const std::string& resource) override;
  void kubeRelist(const std::string& resource) override;
  void kubeWatchRestart(const std::string& resource, const std::string& reason) override;
  void kubeApiCall(const std::string& verb, const std::string& code) override;
  void kubeCachedObjects(const std::string& resource, double count) override;
  void defragAdvice(double pending_pods, double gpus, double moves) override;
  void defragEvicted(double pods) override;
  // An exception caught at a thread entry or request boundary instead of ending the process;
  // where: watch | binder | events | housekeeping | ticker | http (adapters/common/internal_errors.h).
  void internalError(const std::string& where);
  // What the HTTP listener `port` (verbs | metrics) reports about its connections: closed by
  // it, by reason (troupe_http_connections_closed_total), and failed accepts
  // (troupe_http_accept_errors_total). Creates the port's series, at 0.
  adapters::ConnectionEvents connectionEvents(const std::string& port);
  // The text exposition format (version 0.0.4).
  std::string serialize() override;

 private:
  const adapters::PerNodeSeries per_node_;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Histogram>& request_duration_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Counter>& rejections_;
  prometheus::Family<prometheus::Counter>& placements_;
  prometheus::Family<prometheus::Histogram>& topology_quality_;
  prometheus::Family<prometheus::Gauge>& gpus_;
  prometheus::Family<prometheus::Gauge>& nodes_;
  prometheus::Gauge& fragmented_;
  prometheus::Gauge& pending_;
  prometheus::Gauge& pods_;
  prometheus::Family<prometheus::Gauge>& gangs_;
  prometheus::Gauge& gang_held_gpus_;
  prometheus::Gauge& draining_nodes_;
  prometheus::Histogram& gang_admit_seconds_;
  prometheus::Counter& gang_timeouts_;
  prometheus::Gauge& node_series_exported_;
  prometheus::Family<prometheus::Counter>& node_scores_;
  prometheus::Counter& scores_remembered_;
  prometheus::Counter& scores_computed_;
  prometheus::Family<prometheus::Gauge>& kube_last_sync_;
  prometheus::Family<prometheus::Counter>& kube_relists_;
  prometheus::Family<prometheus::Counter>& kube_watch_restarts_;
  prometheus::Family<prometheus::Counter>& kube_api_calls_;
  prometheus::Family<prometheus::Gauge>& kube_cached_;
  prometheus::Family<prometheus::Counter>& internal_errors_;
  prometheus::Family<prometheus::Counter>& connections_closed_;
  prometheus::Family<prometheus::Counter>& accept_errors_;
  prometheus::Gauge& defrag_pending_;
  prometheus::Gauge& defrag_gpus_;
  prometheus::Gauge& defrag_moves_;
  prometheus::Counter& defrag_evictions_;

  struct ProductSeries {
    prometheus::Gauge* total = nullptr;
    prometheus::Gauge* allocated = nullptr;
    prometheus::Gauge* shared = nullptr;
    prometheus::Gauge* free = nullptr;
    prometheus::Gauge* nodes = nullptr;
  };
  std::mutex cluster_mu_;     // refreshCluster and refreshQueues replace label sets as a whole
  QueueSeries queue_series_;  // guarded by cluster_mu_
  std::unordered_map<std::string, ProductSeries> product_series_;  // guarded by cluster_mu_
  // troupe_node_gpus: the last summary's node rows, written by serialize() itself
  // (node_gpus_text.h), not through the registry; empty while per-node series are off.
  // Guarded by cluster_mu_.
  std::vector<sched::ClusterSummary::NodeRow> node_rows_;
  // The Scheduler's running totals last added to the score counters; guarded by cluster_mu_.
  uint64_t scores_remembered_seen_ = 0;
  uint64_t scores_computed_seen_ = 0;
};

}  // namespace troupe::metrics
