// The per-node series switch (metrics.perNodeSeries, --per-node-metrics): auto turns the
// troupe_node_gpus series off at perNodeSeriesOffAt GPU nodes and back on below it, off never
// exports a node label, on always does, and the cluster-wide series are the same either way.
#include <catch2/catch.hpp>
#include <sstream>

#include "adapters/metrics/metrics.h"
#include "adapters/yaml/config.h"
#include "support/fixtures.h"
#include "troupe/sched/scheduler/scheduler.h"

using troupe::adapters::PerNodeSeries;
using troupe::metrics::Metrics;
using troupe::testing::gpuNode;
using troupe::testing::gpuPod;

namespace {

const std::string kH100 = "NVIDIA-H100-80GB-HBM3";

// A scrape as the /metrics handler does it.
std::string scrape(Metrics& metrics, const troupe::sched::Scheduler& scheduler) {
  metrics.refreshCluster(scheduler.summary(metrics.maxNodeRows()));
  return metrics.serialize();
}

bool hasNodeLabel(const std::string& text) { return text.find("node=\"") != std::string::npos; }

size_t nodeSeriesCount(const std::string& text) {
  size_t n = 0;
  for (size_t at = text.find("\ntroupe_node_gpus{"); at != std::string::npos;
       at = text.find("\ntroupe_node_gpus{", at + 1))
    ++n;
  return n;
}

double value(const std::string& text, const std::string& series) {
  const size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

// Every line but the per-node family's and the switch's own gauge.
std::string aggregates(const std::string& text) {
  std::istringstream in(text);
  std::string out;
  for (std::string line; std::getline(in, line);) {
    if (line.find("troupe_node_gpus") != std::string::npos) continue;
    if (line.find("troupe_node_series_exported") != std::string::npos) continue;
    out += line + "\n";
  }
  return out;
}

struct Cluster {
  troupe::sched::Scheduler scheduler{troupe::sched::SchedulerConfig{}};
  explicit Cluster(int gpu_nodes) {
    for (int i = 0; i < gpu_nodes; ++i) add(i);
    REQUIRE(scheduler.upsertNode(gpuNode("cpu-only", 0)).isOk());  // never counted
    auto pod = gpuPod("p", 3);
    REQUIRE(scheduler.filter(pod, {"n0"}).passed.size() == 1);
    REQUIRE(scheduler.reserve(pod.uid, pod.ns, pod.name, "n0").isOk());
  }
  void add(int i) { REQUIRE(scheduler.upsertNode(gpuNode("n" + std::to_string(i), 8)).isOk()); }
};

}  // namespace

TEST_CASE("per-node series: auto turns them off at the threshold and back on below it", "[metrics]") {
  Cluster c(3);
  Metrics metrics("test", PerNodeSeries{PerNodeSeries::Mode::kAuto, 4});
  std::string text = scrape(metrics, c.scheduler);
  CHECK(nodeSeriesCount(text) == 9);  // 3 GPU nodes x total, allocated, shared
  CHECK(value(text, "troupe_node_gpus{node=\"n0\",product=\"" + kH100 + "\",state=\"allocated\"}") == 3);
  CHECK(value(text, "troupe_node_series_exported") == 1);

  c.add(3);  // 4 GPU nodes: at the threshold
  text = scrape(metrics, c.scheduler);
  CHECK_FALSE(hasNodeLabel(text));
  CHECK(value(text, "troupe_node_series_exported") == 0);
  CHECK(value(text, "troupe_nodes{product=\"" + kH100 + "\"}") == 4);

  REQUIRE(c.scheduler.removeNode("n3"));  // below it again
  text = scrape(metrics, c.scheduler);
  CHECK(nodeSeriesCount(text) == 9);
  CHECK(value(text, "troupe_node_gpus{node=\"n0\",product=\"" + kH100 + "\",state=\"allocated\"}") == 3);
  CHECK(value(text, "troupe_node_series_exported") == 1);
}

TEST_CASE("per-node series: the default threshold is 1,000 GPU nodes", "[metrics]") {
  const PerNodeSeries automatic;
  CHECK(automatic.mode == PerNodeSeries::Mode::kAuto);
  CHECK(automatic.exportedFor(999));
  CHECK_FALSE(automatic.exportedFor(1000));
  CHECK(automatic.maxNodeRows() == 999);
}

TEST_CASE("per-node series: off exports no node label, on exports them at any size", "[metrics]") {
  Cluster c(5);
  Metrics off("test", PerNodeSeries{PerNodeSeries::Mode::kOff, 1000});
  const std::string off_text = scrape(off, c.scheduler);
  CHECK_FALSE(hasNodeLabel(off_text));
  CHECK(value(off_text, "troupe_node_series_exported") == 0);

  // on ignores the threshold (2 here: auto would be off with 5 nodes).
  Metrics on("test", PerNodeSeries{PerNodeSeries::Mode::kOn, 2});
  const std::string on_text = scrape(on, c.scheduler);
  CHECK(nodeSeriesCount(on_text) == 15);
  CHECK(on_text.find("node=\"cpu-only\"") == std::string::npos);  // GPU nodes only
  CHECK(value(on_text, "troupe_node_series_exported") == 1);

  // The cluster-wide and per-product series are identical in both modes.
  CHECK(aggregates(on_text) == aggregates(off_text));
  CHECK(value(off_text, "troupe_gpus{product=\"" + kH100 + "\",state=\"allocated\"}") == 3);
  CHECK(value(off_text, "troupe_gpus{product=\"" + kH100 + "\",state=\"total\"}") == 40);
  CHECK(value(off_text, "troupe_gpu_pods") == 1);
}

TEST_CASE("per-node series: a summary without node rows removes them even when on", "[metrics]") {
  Cluster c(3);
  Metrics on("test", PerNodeSeries{PerNodeSeries::Mode::kOn, 1000});
  CHECK(nodeSeriesCount(scrape(on, c.scheduler)) == 9);
  const troupe::sched::ClusterSummary capped = c.scheduler.summary(2);
  CHECK(capped.node_rows_omitted);
  CHECK(capped.by_node.empty());
  on.refreshCluster(capped);
  CHECK_FALSE(hasNodeLabel(on.serialize()));
}

TEST_CASE("per-node series: Scheduler::summary keeps node rows up to max_node_rows", "[metrics]") {
  Cluster c(3);
  const troupe::sched::ClusterSummary all = c.scheduler.summary();
  CHECK_FALSE(all.node_rows_omitted);
  REQUIRE(all.by_node.size() == 3);
  CHECK(all.by_node[0].node == "n0");
  CHECK(all.by_node[2].node == "n2");
  CHECK(c.scheduler.summary(3).by_node.size() == 3);
  const troupe::sched::ClusterSummary none = c.scheduler.summary(0);
  CHECK(none.node_rows_omitted);
  CHECK(none.by_node.empty());
  // Everything else is counted the same.
  CHECK(none.pods == all.pods);
  REQUIRE(none.by_product.size() == 1);
  CHECK(none.by_product[0].nodes == 3);
  CHECK(none.by_product[0].used_milli == all.by_product[0].used_milli);
  CHECK(none.fragmented_gpus == all.fragmented_gpus);
}

TEST_CASE("per-node series: metrics config keys", "[metrics][config]") {
  using troupe::config::parseServeConfig;
  auto c = parseServeConfig("listen: 127.0.0.1:1\n", "t.yaml");
  REQUIRE(c.isOk());
  CHECK(c.value().per_node_series.mode == PerNodeSeries::Mode::kAuto);
  CHECK(c.value().per_node_series.auto_off_at == 1000);

  c = parseServeConfig("metrics: {perNodeSeries: off}\n", "t.yaml");
  REQUIRE(c.isOk());
  CHECK(c.value().per_node_series.mode == PerNodeSeries::Mode::kOff);
  c = parseServeConfig("metrics:\n  perNodeSeries: on\n", "t.yaml");
  REQUIRE(c.isOk());
  CHECK(c.value().per_node_series.mode == PerNodeSeries::Mode::kOn);
  c = parseServeConfig("metrics: {perNodeSeries: auto, perNodeSeriesOffAt: 5000}\n", "t.yaml");
  REQUIRE(c.isOk());
  CHECK(c.value().per_node_series.auto_off_at == 5000);

  c = parseServeConfig("metrics:\n  perNodeSeries: sometimes\n", "t.yaml");
  REQUIRE_FALSE(c.isOk());
  CHECK_THAT(c.status().message(),
             Catch::StartsWith("t.yaml:2: metrics.perNodeSeries: \"sometimes\" is not a choice: use auto"));
  c = parseServeConfig("metrics:\n  perNodeSeries: [on]\n", "t.yaml");
  REQUIRE_FALSE(c.isOk());
  CHECK_THAT(c.status().message(),
             Catch::StartsWith("t.yaml:2: metrics.perNodeSeries: must be auto, on or off"));
  c = parseServeConfig("metrics:\n  perNodeSeriesOffAt: 0\n", "t.yaml");
  REQUIRE_FALSE(c.isOk());
  CHECK_THAT(c.status().message(),
             Catch::StartsWith("t.yaml:2: metrics.perNodeSeriesOffAt: must be 1 to 1000000"));
  c = parseServeConfig("metrics:\n  perNodeSeriesOffAt: many\n", "t.yaml");
  REQUIRE_FALSE(c.isOk());
  CHECK_THAT(c.status().message(),
             Catch::StartsWith("t.yaml:2: metrics.perNodeSeriesOffAt: must be a number"));
  c = parseServeConfig("metrics:\n  perNode: off\n", "t.yaml");
  REQUIRE_FALSE(c.isOk());
  CHECK_THAT(c.status().message(), Catch::StartsWith("t.yaml:2: metrics.perNode: unknown key"));
  CHECK_FALSE(troupe::config::parsePerNodeSeries("true").isOk());
}
