// Troupe's Prometheus metrics (prometheus-cpp), one declared list for the whole service.
//
// Names follow Prometheus conventions: troupe_ prefix, base units (_seconds), _total on
// counters. Labels are bounded sets (verb, outcome, category, product): never pod names.
// Thread-safe: prometheus-cpp metrics are atomic; refreshCluster() takes its own lock.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <memory>
#include <mutex>
#include <string>

#include "troupe/sched/scheduler.h"

namespace troupe::metrics {

class Metrics {
 public:
  explicit Metrics(const std::string& version);

  // One extender call: verb is filter|prioritize|bind|preempt; outcome ok|error|bad_request.
  void observeRequest(const std::string& verb, const std::string& outcome, double seconds);
  void countRejections(const std::map<std::string, int>& categories);
  // A pod placed (reserved) with the topology quality (0..1) of its GPU set.
  void observePlacement(double topology_quality, bool best_possible);
  // Gang admissions (time from first sight to all members bound) and barrier timeouts.
  void observeGangEvents(const sched::Scheduler::GangEvents& events);
  // Snapshot gauges from the scheduler's model; called before each scrape.
  void refreshCluster(const sched::ClusterSummary& summary);
  // The text exposition format (version 0.0.4).
  std::string serialize();

 private:
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
  std::mutex cluster_mu_;  // refreshCluster replaces label sets as a whole
};

}  // namespace troupe::metrics
