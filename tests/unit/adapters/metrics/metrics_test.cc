// Troupe's Prometheus metrics from the scheduler's model: the per-node GPU gauges follow the
// nodes (allocations, shares, nodes that leave).
#include "adapters/metrics/metrics.h"

#include <catch2/catch.hpp>

#include "support/fixtures.h"
#include "troupe/sched/scheduler/scheduler.h"

using troupe::testing::gpuNode;
using troupe::testing::gpuPod;

namespace {

double value(const std::string& text, const std::string& series) {
  const size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

std::string nodeSeries(const std::string& node, const std::string& product, const std::string& state) {
  return "troupe_node_gpus{node=\"" + node + "\",product=\"" + product + "\",state=\"" + state + "\"}";
}

}  // namespace

TEST_CASE("metrics: per-node GPU gauges follow allocations and nodes that leave", "[metrics]") {
  const std::string h100 = "NVIDIA-H100-80GB-HBM3";
  const std::string a100 = "NVIDIA-A100-SXM4-80GB";
  troupe::sched::Scheduler scheduler{troupe::sched::SchedulerConfig{}};
  REQUIRE(scheduler.upsertNode(gpuNode("h1", 8)).isOk());
  REQUIRE(scheduler.upsertNode(gpuNode("h2", 8)).isOk());
  REQUIRE(scheduler.upsertNode(gpuNode("a1", 4, a100, 81920)).isOk());
  REQUIRE(scheduler.upsertNode(gpuNode("cpu-only", 0)).isOk());
  troupe::metrics::Metrics metrics("test");

  // Three whole GPUs on h1, and half of one more.
  auto pod = gpuPod("p", 3);
  REQUIRE(scheduler.filter(pod, {"h1"}).passed.size() == 1);
  REQUIRE(scheduler.reserve(pod.uid, pod.ns, pod.name, "h1").isOk());
  auto half = gpuPod("half", 0, {{"troupe.dev/gpu-milli", "500"}});
  REQUIRE(scheduler.filter(half, {"h1"}).passed.size() == 1);
  REQUIRE(scheduler.reserve(half.uid, half.ns, half.name, "h1").isOk());
  metrics.refreshCluster(scheduler.summary());
  std::string text = metrics.serialize();
  CHECK(value(text, nodeSeries("h1", h100, "total")) == 8);
  CHECK(value(text, nodeSeries("h1", h100, "allocated")) == 3.5);
  CHECK(value(text, nodeSeries("h1", h100, "shared")) == 1);
  CHECK(value(text, nodeSeries("h2", h100, "allocated")) == 0);
  CHECK(value(text, nodeSeries("a1", a100, "total")) == 4);
  CHECK(text.find("node=\"cpu-only\"") == std::string::npos);  // GPU nodes only
  // The per-product gauges are kept.
  CHECK(value(text, "troupe_gpus{product=\"" + h100 + "\",state=\"allocated\"}") == 3.5);

  // Released, and a node leaves: its series go with it.
  scheduler.release(pod.uid);
  scheduler.release(half.uid);
  REQUIRE(scheduler.removeNode("h2"));
  metrics.refreshCluster(scheduler.summary());
  text = metrics.serialize();
  CHECK(value(text, nodeSeries("h1", h100, "allocated")) == 0);
  CHECK(value(text, nodeSeries("h1", h100, "shared")) == 0);
  CHECK(text.find("node=\"h2\"") == std::string::npos);
  CHECK(value(text, nodeSeries("a1", a100, "total")) == 4);
}

TEST_CASE("metrics: narrowing's remembered and computed node scores are counted", "[metrics]") {
  troupe::sched::SchedulerConfig config;
  config.narrow_to_best = true;
  troupe::sched::Scheduler scheduler{config};
  for (const char* n : {"n1", "n2", "n3"}) REQUIRE(scheduler.upsertNode(gpuNode(n, 8)).isOk());
  troupe::metrics::Metrics metrics("test");
  const std::string remembered = "troupe_filter_node_scores_total{source=\"remembered\"}";
  const std::string computed = "troupe_filter_node_scores_total{source=\"computed\"}";
  metrics.refreshCluster(scheduler.summary());
  CHECK(value(metrics.serialize(), remembered) == 0);
  CHECK(value(metrics.serialize(), computed) == 0);

  // The first pod of a shape scores all three nodes; the next one of that shape reuses them.
  REQUIRE(scheduler.filter(gpuPod("a", 2), {"n1", "n2", "n3"}).passed.size() == 1);
  metrics.refreshCluster(scheduler.summary());
  CHECK(value(metrics.serialize(), computed) == 3);
  REQUIRE(scheduler.filter(gpuPod("b", 2), {"n1", "n2", "n3"}).passed.size() == 1);
  // A refresh adds only what is new since the last one.
  metrics.refreshCluster(scheduler.summary());
  metrics.refreshCluster(scheduler.summary());
  const std::string text = metrics.serialize();
  CHECK(value(text, computed) == 3);
  CHECK(value(text, remembered) == 3);
}

TEST_CASE("metrics: per-product series of products no node has any more are removed", "[metrics]") {
  // Product names come from node labels; a learned or relabelled node must not leave its
  // label value in /metrics for good (security review probe 112).
  const std::string h100 = "NVIDIA-H100-80GB-HBM3";
  const std::string fake = "INJECTED-PRODUCT-0001";
  troupe::sched::Scheduler scheduler{troupe::sched::SchedulerConfig{}};
  REQUIRE(scheduler.upsertNode(gpuNode("h1", 8)).isOk());
  REQUIRE(scheduler.upsertNode(gpuNode("x1", 4, fake, 1024)).isOk());
  troupe::metrics::Metrics metrics("test");
  metrics.refreshCluster(scheduler.summary());
  std::string text = metrics.serialize();
  CHECK(value(text, "troupe_nodes{product=\"" + fake + "\"}") == 1);
  CHECK(value(text, "troupe_gpus{product=\"" + fake + "\",state=\"total\"}") == 4);

  SECTION("the node leaves") { REQUIRE(scheduler.removeNode("x1")); }
  SECTION("the node is relabelled to another product") {
    REQUIRE(scheduler.upsertNode(gpuNode("x1", 4)).isOk());
  }
  metrics.refreshCluster(scheduler.summary());
  text = metrics.serialize();
  CHECK(text.find(fake) == std::string::npos);
  CHECK(value(text, "troupe_nodes{product=\"" + h100 + "\"}") >= 1);
  CHECK(value(text, "troupe_gpus{product=\"" + h100 + "\",state=\"free\"}") >= 8);
  // Back again: the series come back.
  REQUIRE(scheduler.upsertNode(gpuNode("x2", 2, fake, 1024)).isOk());
  metrics.refreshCluster(scheduler.summary());
  CHECK(value(metrics.serialize(), "troupe_gpus{product=\"" + fake + "\",state=\"total\"}") == 2);
}
