#include "adapters/metrics/queue_series.h"

#include <set>

namespace troupe::metrics {
namespace {

double gpus(int64_t milli) { return static_cast<double>(milli) / 1000.0; }

// A guarantee set per product only still guarantees their sum in all.
int64_t guaranteedMilli(const sched::GpuQuota& q) {
  if (q.milli) return *q.milli;
  int64_t sum = 0;
  for (const auto& [product, milli] : q.product_milli) sum += milli;
  return sum;
}

// Label values must stay a small set: a short token is kept (e.g. "guarantee"), anything
// else (a sentence naming pods) is counted as "other".
std::string reasonLabel(const std::string& reason) {
  constexpr size_t kMaxReasonLabel = 32;
  const bool token = !reason.empty() && reason.size() <= kMaxReasonLabel &&
                     reason.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_-") == std::string::npos;
  return token ? reason : "other";
}

}  // namespace

QueueSeries::QueueSeries(prometheus::Registry& registry)
    : allocated_(prometheus::BuildGauge()
                     .Name("troupe_queue_allocated_gpus")
                     .Help("GPUs held by bound and reserved pods of a queue and its children (shares count "
                           "in thousandths).")
                     .Register(registry)),
      guaranteed_(prometheus::BuildGauge()
                      .Name("troupe_queue_guaranteed_gpus")
                      .Help("GPUs a queue is guaranteed (spec.guaranteed; 0 when unset): reclaim gives them "
                            "back from queues above their fair share.")
                      .Register(registry)),
      limit_(prometheus::BuildGauge()
                 .Name("troupe_queue_limit_gpus")
                 .Help("The most GPUs a queue and its children may hold (spec.limit.gpus); absent when the "
                       "queue sets no limit in all products.")
                 .Register(registry)),
      fair_share_(prometheus::BuildGauge()
                      .Name("troupe_queue_fair_share_gpus")
                      .Help("GPUs a queue is entitled to now: weighted dominant-resource fair share of the "
                            "GPUs over the queues' demand, guarantees first (docs/queues.md).")
                      .Register(registry)),
      dominant_share_(prometheus::BuildGauge()
                          .Name("troupe_queue_dominant_share")
                          .Help("The largest fraction of any GPU product's capacity a queue holds (0..1).")
                          .Register(registry)),
      pending_gpus_(prometheus::BuildGauge()
                        .Name("troupe_queue_pending_gpus")
                        .Help("GPUs asked for by a queue's pending pods.")
                        .Register(registry)),
      pending_pods_(prometheus::BuildGauge()
                        .Name("troupe_queue_pending_pods")
                        .Help("Pending GPU pods of a queue.")
                        .Register(registry)),
      evictions_(prometheus::BuildCounter()
                     .Name("troupe_queue_evictions_total")
                     .Help("Pods of a queue evicted by reclaim (the Eviction API), by the plan's reason.")
                     .Register(registry)) {}

void QueueSeries::add(const std::string& queue, Series& s) {
  const prometheus::Labels labels{{"queue", queue}};
  s.allocated = &allocated_.Add(labels);
  s.guaranteed = &guaranteed_.Add(labels);
  s.fair_share = &fair_share_.Add(labels);
  s.dominant_share = &dominant_share_.Add(labels);
  s.pending_gpus = &pending_gpus_.Add(labels);
  s.pending_pods = &pending_pods_.Add(labels);
}

void QueueSeries::remove(Series& s) {
  allocated_.Remove(s.allocated);
  guaranteed_.Remove(s.guaranteed);
  if (s.limit != nullptr) limit_.Remove(s.limit);
  fair_share_.Remove(s.fair_share);
  dominant_share_.Remove(s.dominant_share);
  pending_gpus_.Remove(s.pending_gpus);
  pending_pods_.Remove(s.pending_pods);
  for (auto& [reason, counter] : s.evictions) evictions_.Remove(counter.first);
  s = Series{};
}

// The counter mirrors the book's total since the start: it takes what is new. A total that went
// down (the book forgot the queue in between) starts the series again.
void QueueSeries::countEvictions(const std::string& queue, Series& s,
                                 const std::map<std::string, uint64_t>& by_reason) {
  std::map<std::string, uint64_t> totals;
  for (const auto& [reason, total] : by_reason) totals[reasonLabel(reason)] += total;
  for (const auto& [reason, total] : totals) {
    auto it = s.evictions.find(reason);
    if (it != s.evictions.end() && total < it->second.second) {
      evictions_.Remove(it->second.first);
      s.evictions.erase(it);
      it = s.evictions.end();
    }
    if (it == s.evictions.end()) {
      it = s.evictions.emplace(reason, std::pair{&evictions_.Add({{"queue", queue}, {"reason", reason}}), 0})
               .first;
    }
    auto& [counter, seen] = it->second;
    if (total > seen) counter->Increment(static_cast<double>(total - seen));
    seen = total;
  }
}

void QueueSeries::refresh(const std::vector<sched::QueueStatus>& statuses) {
  std::set<std::string> present;
  for (const sched::QueueStatus& q : statuses) {
    if (!q.invalid.empty()) continue;
    const std::string& name = q.spec.name;
    present.insert(name);
    Series& s = queues_[name];
    if (s.allocated == nullptr) add(name, s);
    s.allocated->Set(gpus(q.allocated_milli));
    s.guaranteed->Set(gpus(guaranteedMilli(q.spec.guaranteed)));
    if (q.spec.limit.milli) {
      if (s.limit == nullptr) s.limit = &limit_.Add({{"queue", name}});
      s.limit->Set(gpus(*q.spec.limit.milli));
    } else if (s.limit != nullptr) {
      limit_.Remove(s.limit);
      s.limit = nullptr;
    }
    s.fair_share->Set(gpus(q.fair_share.total_milli));
    s.dominant_share->Set(q.dominant_share);
    s.pending_gpus->Set(gpus(q.pending_milli));
    s.pending_pods->Set(q.pending_pods);
    countEvictions(name, s, q.evictions);
  }
  for (auto it = queues_.begin(); it != queues_.end();) {
    if (present.count(it->first)) {
      ++it;
      continue;
    }
    remove(it->second);
    it = queues_.erase(it);
  }
}

}  // namespace troupe::metrics
