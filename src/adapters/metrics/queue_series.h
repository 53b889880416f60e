// Per-queue Prometheus series (troupe_queue_*) from the Scheduler's queue statuses
// (queue_book.h): what each queue holds, is entitled to and waits for, and how many of its pods
// reclaim evicted. The label set is bounded by the queues defined (and the eviction reason by
// a short token, else "other"): a queue that goes (deleted, or
// invalid) takes its series with it, so Queue objects created and deleted never pile up.
// Not thread-safe on its own: Metrics calls it under its cluster lock.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "troupe/sched/queue/queue_book.h"

namespace troupe::metrics {

class QueueSeries {
 public:
  explicit QueueSeries(prometheus::Registry& registry);

  // Replaces every queue's values with these statuses. Invalid queues export nothing (their
  // pods are not counted; the Queue's Valid condition says why).
  void refresh(const std::vector<sched::QueueStatus>& statuses);

 private:
  struct Series {
    prometheus::Gauge* allocated = nullptr;
    prometheus::Gauge* guaranteed = nullptr;
    prometheus::Gauge* limit = nullptr;  // only while the queue sets a limit in all products
    prometheus::Gauge* fair_share = nullptr;
    prometheus::Gauge* dominant_share = nullptr;
    prometheus::Gauge* pending_gpus = nullptr;
    prometheus::Gauge* pending_pods = nullptr;
    // reason -> the counter and the book's total it last mirrored
    std::map<std::string, std::pair<prometheus::Counter*, uint64_t>> evictions;
  };
  void add(const std::string& queue, Series& s);
  void remove(Series& s);
  void countEvictions(const std::string& queue, Series& s, const std::map<std::string, uint64_t>& by_reason);

  prometheus::Family<prometheus::Gauge>& allocated_;
  prometheus::Family<prometheus::Gauge>& guaranteed_;
  prometheus::Family<prometheus::Gauge>& limit_;
  prometheus::Family<prometheus::Gauge>& fair_share_;
  prometheus::Family<prometheus::Gauge>& dominant_share_;
  prometheus::Family<prometheus::Gauge>& pending_gpus_;
  prometheus::Family<prometheus::Gauge>& pending_pods_;
  prometheus::Family<prometheus::Counter>& evictions_;
  std::map<std::string, Series> queues_;
};

}  // namespace troupe::metrics
