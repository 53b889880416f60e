// The per-queue series (troupe_queue_*): values from the queues' statuses, the limit only while
// one is set, evictions counted from the book's running totals, and the series of a queue that
// is gone (deleted or invalid) removed.
#include <catch2/catch.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "adapters/common/logger.h"
#include "adapters/http/extender_server.h"
#include "adapters/metrics/metrics.h"
#include "support/fixtures.h"
#include "troupe/sched/queue/queue_book.h"
#include "troupe/sched/scheduler/scheduler.h"

namespace {

using troupe::sched::QueueStatus;

double value(const std::string& text, const std::string& series) {
  const size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

std::string of(const std::string& metric, const std::string& queue) {
  return metric + "{queue=\"" + queue + "\"}";
}

QueueStatus status(const std::string& name, int64_t allocated_milli, int64_t fair_milli) {
  QueueStatus q;
  q.spec.name = name;
  q.allocated_milli = allocated_milli;
  q.fair_share.total_milli = fair_milli;
  return q;
}

}  // namespace

TEST_CASE("queue metrics: each queue's allocation, guarantee, limit, fair share and pending",
          "[metrics][queues]") {
  troupe::metrics::Metrics metrics("test");
  QueueStatus research = status("research", 12500, 16000);
  research.spec.guaranteed.milli = 8000;
  research.spec.limit.milli = 32000;
  research.dominant_share = 0.375;
  research.pending_milli = 3000;
  research.pending_pods = 2;
  QueueStatus batch = status("batch", 4000, 8000);
  // A guarantee set per product only guarantees their sum in all.
  batch.spec.guaranteed.product_milli = {{"NVIDIA-H100-80GB-HBM3", 2000}, {"NVIDIA-A100-SXM4-80GB", 500}};
  metrics.refreshQueues({research, batch});
  const std::string text = metrics.serialize();

  CHECK(value(text, of("troupe_queue_allocated_gpus", "research")) == 12.5);
  CHECK(value(text, of("troupe_queue_guaranteed_gpus", "research")) == 8);
  CHECK(value(text, of("troupe_queue_limit_gpus", "research")) == 32);
  CHECK(value(text, of("troupe_queue_fair_share_gpus", "research")) == 16);
  CHECK(value(text, of("troupe_queue_dominant_share", "research")) == 0.375);
  CHECK(value(text, of("troupe_queue_pending_gpus", "research")) == 3);
  CHECK(value(text, of("troupe_queue_pending_pods", "research")) == 2);
  CHECK(value(text, of("troupe_queue_allocated_gpus", "batch")) == 4);
  CHECK(value(text, of("troupe_queue_guaranteed_gpus", "batch")) == 2.5);
  CHECK(value(text, of("troupe_queue_pending_pods", "batch")) == 0);
  // No limit set: no limit series (absent, not 0 and not infinity).
  CHECK(text.find(of("troupe_queue_limit_gpus", "batch")) == std::string::npos);
  // Every family with series has its help text (evictions: below, once there are some).
  for (const char* family :
       {"troupe_queue_allocated_gpus", "troupe_queue_guaranteed_gpus", "troupe_queue_limit_gpus",
        "troupe_queue_fair_share_gpus", "troupe_queue_dominant_share", "troupe_queue_pending_gpus",
        "troupe_queue_pending_pods"}) {
    INFO(family);
    CHECK(text.find(std::string("# HELP ") + family + " ") != std::string::npos);
  }
}

TEST_CASE("queue metrics: series of a deleted or invalid queue and of a dropped limit disappear",
          "[metrics][queues]") {
  troupe::metrics::Metrics metrics("test");
  QueueStatus a = status("team-a", 2000, 4000);
  a.spec.limit.milli = 8000;
  a.evictions = {{"reclaim for team-b", 3}};
  QueueStatus b = status("team-b", 1000, 4000);
  metrics.refreshQueues({a, b});
  std::string text = metrics.serialize();
  REQUIRE(value(text, of("troupe_queue_allocated_gpus", "team-a")) == 2);
  REQUIRE(value(text, of("troupe_queue_limit_gpus", "team-a")) == 8);

  SECTION("the queue is deleted") { metrics.refreshQueues({b}); }
  SECTION("the queue becomes invalid") {
    a.invalid = "queue team-a: spec.weight is 0: must be a positive number";
    metrics.refreshQueues({a, b});
  }
  text = metrics.serialize();
  CHECK(text.find("queue=\"team-a\"") == std::string::npos);
  CHECK(value(text, of("troupe_queue_allocated_gpus", "team-b")) == 1);

  // Back again, without its limit: the limit series stays away.
  a.invalid.clear();
  a.spec.limit.milli.reset();
  metrics.refreshQueues({a, b});
  text = metrics.serialize();
  CHECK(value(text, of("troupe_queue_allocated_gpus", "team-a")) == 2);
  CHECK(text.find(of("troupe_queue_limit_gpus", "team-a")) == std::string::npos);
}

TEST_CASE("queue metrics: evictions count what the book counted since the last scrape", "[metrics][queues]") {
  troupe::metrics::Metrics metrics("test");
  const std::string series = R"(troupe_queue_evictions_total{queue="batch",reason="reclaim"})";
  QueueStatus batch = status("batch", 0, 0);
  metrics.refreshQueues({batch});
  CHECK(metrics.serialize().find("troupe_queue_evictions_total{") == std::string::npos);

  batch.evictions = {{"reclaim", 2}};
  metrics.refreshQueues({batch});
  CHECK(value(metrics.serialize(), series) == 2);
  CHECK(metrics.serialize().find("# HELP troupe_queue_evictions_total Pods of a queue evicted") !=
        std::string::npos);
  metrics.refreshQueues({batch});  // nothing new
  CHECK(value(metrics.serialize(), series) == 2);
  batch.evictions = {{"reclaim", 5}, {"gang", 1}};
  metrics.refreshQueues({batch});
  const std::string text = metrics.serialize();
  CHECK(value(text, series) == 5);
  CHECK(value(text, R"(troupe_queue_evictions_total{queue="batch",reason="gang"})") == 1);
  // A reason that is a sentence, not a short token, is counted as "other" (bounded labels).
  batch.evictions["reclaim for prod: ns/pod-1 below its guarantee"] = 2;
  batch.evictions["Guarantee!"] = 1;
  metrics.refreshQueues({batch});
  CHECK(value(metrics.serialize(), R"(troupe_queue_evictions_total{queue="batch",reason="other"})") == 3);
  // The queue goes: its counters go with it; back with a lower total, they start from that.
  metrics.refreshQueues({});
  CHECK(metrics.serialize().find("queue=\"batch\"") == std::string::npos);
  batch.evictions = {{"reclaim", 1}};
  metrics.refreshQueues({batch});
  CHECK(value(metrics.serialize(), series) == 1);
}

TEST_CASE("queue metrics: GET /metrics exports the scheduler's queues as they are now",
          "[metrics][queues][http]") {
  std::ostringstream log;
  troupe::adapters::Logger logger{log, troupe::adapters::LogLevel::kWarn};
  troupe::sched::Scheduler scheduler{troupe::sched::SchedulerConfig{}};
  troupe::metrics::Metrics metrics("test");
  troupe::http::ExtenderHandler handler{troupe::http::HandlerOptions{}, scheduler, metrics, logger};
  REQUIRE(scheduler.upsertNode(troupe::testing::gpuNode("n1", 8)).isOk());
  troupe::sched::QueueSpec team;
  team.name = "team-a";
  team.limit.milli = 4000;
  scheduler.setQueues(troupe::sched::QueueTree::build({team}));

  auto pod = troupe::testing::gpuPod("p", 3, {{"troupe.dev/queue", "team-a"}});
  REQUIRE(scheduler.filter(pod, {"n1"}).passed.size() == 1);
  REQUIRE(scheduler.reserve(pod.uid, pod.ns, pod.name, "n1").isOk());
  std::string text = handler.handle("GET", "/metrics", "").body;
  CHECK(value(text, of("troupe_queue_allocated_gpus", "team-a")) == 3);
  CHECK(value(text, of("troupe_queue_limit_gpus", "team-a")) == 4);
  CHECK(value(text, of("troupe_queue_allocated_gpus", "default")) == 0);  // the implicit default queue

  // The queues are replaced by none: queueing is off and their series go.
  scheduler.setQueues(troupe::sched::QueueTree{});
  text = handler.handle("GET", "/metrics", "").body;
  CHECK(text.find("troupe_queue_allocated_gpus{") == std::string::npos);
}
