// What the extender's HTTP handler reports, and the exposition it serves on GET /metrics.
// The HTTP adapter depends on this interface; the Prometheus adapter (metrics::Metrics)
// implements it and the app hands one to the other, so either can be tested or replaced on
// its own. Every method may be called from many threads at once.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "troupe/sched/scheduler/scheduler.h"

namespace troupe::adapters {

class ExtenderMetrics {
 public:
  virtual ~ExtenderMetrics() = default;

  // One extender call: verb is filter|prioritize|bind|preempt; outcome ok|error|bad_request.
  virtual void observeRequest(const std::string& verb, const std::string& outcome, double seconds) = 0;
  // Filter rejections by category (Scheduler's FilterResult::categories).
  virtual void countRejections(const std::map<std::string, int>& categories) = 0;
  // A pod placed (reserved) with the topology quality (0..1) of its GPU set.
  virtual void observePlacement(double topology_quality, bool best_possible) = 0;

  // A scrape: the per-node rows wanted of Scheduler::summary, then the summary, the queues'
  // statuses (Scheduler::queueStatuses) and the gang events drained since the last scrape, then
  // the text exposition format.
  virtual size_t maxNodeRows() const = 0;
  virtual void refreshCluster(sched::ClusterSummary summary) = 0;
  virtual void refreshQueues(const std::vector<sched::QueueStatus>& statuses) = 0;
  virtual void observeGangEvents(const sched::Scheduler::GangEvents& events) = 0;
  virtual std::string serialize() = 0;
};

}  // namespace troupe::adapters
