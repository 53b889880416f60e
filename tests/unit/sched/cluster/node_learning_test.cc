// Node facts from request bodies (security review probes 108, 109, 112): with --cluster or the
// Kubernetes API they change nothing; in learn mode the learned nodes are capped and expire.
#include <catch2/catch.hpp>
#include <chrono>
#include <sstream>

#include "adapters/common/logger.h"
#include "adapters/http/extender_server.h"
#include "adapters/metrics/metrics.h"
#include "support/fixtures.h"
#include "troupe/sched/scheduler/scheduler.h"

namespace {

using troupe::sched::Clock;
using troupe::sched::Scheduler;
using troupe::sched::SchedulerConfig;
using troupe::testing::gpuNode;
using troupe::testing::gpuPod;

// The Node object kube-scheduler sends in full-node mode (nodeCacheCapable: false).
std::string nodeJson(const std::string& name, int gpus) {
  return R"({"metadata":{"name":")" + name +
         R"(","labels":{"nvidia.com/gpu.product":"NVIDIA-H100-80GB-HBM3",)" +
         R"("nvidia.com/gpu.memory":"81559"}},"status":{"allocatable":{"nvidia.com/gpu":")" +
         std::to_string(gpus) + R"("}}})";
}

std::string podJson(const std::string& name, int gpus) {
  return R"({"metadata":{"name":")" + name + R"(","namespace":"ns","uid":"uid-)" + name +
         R"("},"spec":{"containers":[{"name":"c","resources":{"limits":{"nvidia.com/gpu":")" +
         std::to_string(gpus) + R"("}}}]}})";
}

std::string fullNodeArgs(const std::string& pod, const std::vector<std::string>& nodes) {
  std::string items;
  for (const std::string& n : nodes) items += (items.empty() ? "" : ",") + n;
  return R"({"Pod":)" + pod + R"(,"Nodes":{"metadata":{},"items":[)" + items + R"(]},"NodeNames":null})";
}

std::string nameArgs(const std::string& pod, const std::string& node) {
  return R"({"Pod":)" + pod + R"(,"Nodes":null,"NodeNames":[")" + node + R"("]})";
}

struct Served {
  std::ostringstream log;
  troupe::adapters::Logger logger{log, troupe::adapters::LogLevel::kWarn};
  Scheduler scheduler;
  troupe::metrics::Metrics metrics{"test"};
  troupe::http::ExtenderHandler handler{troupe::http::HandlerOptions{}, scheduler, metrics, logger};
  explicit Served(SchedulerConfig config) : scheduler(std::move(config)) {}
};

SchedulerConfig noLearning() {
  SchedulerConfig c;
  c.learning.enabled = false;  // --cluster or the Kubernetes API: they own the node facts
  return c;
}

}  // namespace

TEST_CASE("node facts: with --cluster, a full-node filter cannot set a node to 0 GPUs (probes 108, 109)",
          "[scheduler][learning]") {
  Served s(noLearning());
  REQUIRE(s.scheduler.upsertNode(gpuNode("h100-0", 8)).isOk());
  REQUIRE(s.scheduler.upsertNode(gpuNode("h100-1", 8)).isOk());
  // Probe 108: the request claims h100-0 has no GPUs.
  auto poisoned = s.handler.handle("POST", "/filter", fullNodeArgs(podJson("x", 1), {nodeJson("h100-0", 0)}));
  REQUIRE(poisoned.status == 200);
  // ... and /prioritize carries a node Troupe has never heard of.
  auto scored = s.handler.handle(
      "POST", "/prioritize", fullNodeArgs(podJson("x", 1), {nodeJson("h100-0", 0), nodeJson("ghost", 8)}));
  REQUIRE(scored.status == 200);
  CHECK(s.scheduler.nodeCount() == 2);  // no ghost
  // Probe 109: an 8-GPU pod still fits h100-0, as the cluster file says.
  auto f = s.handler.handle("POST", "/filter", nameArgs(podJson("big", 8), "h100-0"));
  INFO(f.body);
  CHECK(f.body.find(R"("NodeNames":["h100-0"])") != std::string::npos);
  // In full-node mode too: the facts of the request are not Troupe's facts.
  f = s.handler.handle("POST", "/filter", fullNodeArgs(podJson("big2", 8), {nodeJson("h100-1", 0)}));
  CHECK(f.body.find(R"("h100-1")") != std::string::npos);
  CHECK(f.body.find("no GPUs") == std::string::npos);
  auto summary = s.scheduler.summary();
  REQUIRE(summary.by_product.size() == 1);
  CHECK(summary.by_product[0].gpus == 16);
}

TEST_CASE("node facts: without learning, nodes only in the request are unknown", "[scheduler][learning]") {
  Scheduler s(noLearning());
  std::vector<std::string> errors;
  auto r = s.filterNodes(gpuPod("p", 1), {gpuNode("stranger", 8)}, &errors);
  CHECK(r.passed.empty());
  REQUIRE(r.unresolvable.contains("stranger"));
  CHECK_THAT(r.unresolvable.at("stranger"), Catch::Contains("unknown to Troupe"));
  CHECK(errors.empty());
  CHECK(s.nodeCount() == 0);
  CHECK(s.learnNodes({gpuNode("stranger", 8)}, nullptr).empty());
  CHECK(s.nodeCount() == 0);
}

TEST_CASE("node facts: 20,000 injected nodes in learn mode are bounded (probe 112)",
          "[scheduler][learning]") {
  SchedulerConfig config;  // the defaults: learn mode, 10,000 nodes at most
  Served s(config);
  const size_t cap = config.learning.max_nodes;
  REQUIRE(cap == 10000);
  for (int request = 0; request < 20; ++request) {
    std::vector<std::string> nodes;
    for (int i = 0; i < 1000; ++i) nodes.push_back(nodeJson("inj-" + std::to_string(request * 1000 + i), 8));
    auto r =
        s.handler.handle("POST", "/filter", fullNodeArgs(podJson("p" + std::to_string(request), 1), nodes));
    REQUIRE(r.status == 200);
    if (request >= 10) CHECK(r.body.find("learnedNodes.maxNodes") != std::string::npos);
  }
  CHECK(s.scheduler.nodeCount() == cap);
  CHECK(s.scheduler.learnedNodeCount() == cap);
  // The log says so once per request, not once per node.
  const std::string log = s.log.str();
  size_t lines = 0;
  for (size_t at = log.find("learnedNodes.maxNodes"); at != std::string::npos;
       at = log.find("learnedNodes.maxNodes", at + 1))
    ++lines;
  CHECK(lines == 10);
  // The metrics stay within the cap too: none per node by default at this size (auto is off
  // from 1,000 GPU nodes), and 3 per node when they are switched on.
  const auto nodeSeries = [](const std::string& body) {
    size_t series = 0;
    for (size_t at = body.find("\ntroupe_node_gpus{"); at != std::string::npos;
         at = body.find("\ntroupe_node_gpus{", at + 1))
      ++series;
    return series;
  };
  CHECK(nodeSeries(s.handler.handle("GET", "/metrics", "").body) == 0);
  troupe::metrics::Metrics on("test",
                              troupe::adapters::PerNodeSeries{troupe::adapters::PerNodeSeries::Mode::kOn});
  on.refreshCluster(s.scheduler.summary());
  CHECK(nodeSeries(on.serialize()) == 3 * cap);
}

TEST_CASE("node facts: learned nodes expire when no request carries them for the TTL",
          "[scheduler][learning]") {
  Clock::time_point t = Clock::time_point{} + std::chrono::hours(100);
  SchedulerConfig config;
  config.learning.max_nodes = 2;
  config.learning.ttl = std::chrono::minutes(10);
  config.clock = [&t] { return t; };
  Scheduler s(config);
  CHECK(s.learnNodes({gpuNode("a", 8), gpuNode("b", 8)}, nullptr).empty());
  auto refused = s.learnNodes({gpuNode("c", 8)}, nullptr);
  REQUIRE(refused.size() == 1);
  CHECK_THAT(refused[0].second, Catch::Contains("learnedNodes.maxNodes"));
  CHECK(s.nodeCount() == 2);
  t += std::chrono::minutes(6);
  CHECK(s.learnNodes({gpuNode("a", 8)}, nullptr).empty());  // a is seen again, b is not
  t += std::chrono::minutes(5);
  CHECK(s.expireLearnedNodes() == 1);  // b: 11 minutes unseen
  CHECK(s.nodeCount() == 1);
  CHECK(s.learnNodes({gpuNode("c", 8)}, nullptr).empty());  // room again
  CHECK(s.nodeCount() == 2);
  t += std::chrono::minutes(11);
  // learnNodes expires too (at most once a second), without a separate call.
  CHECK(s.learnNodes({gpuNode("d", 8)}, nullptr).empty());
  CHECK(s.nodeCount() == 1);
  CHECK(s.learnedNodeCount() == 1);
}

TEST_CASE("node facts: a learned node's name is a Kubernetes node name", "[scheduler][learning]") {
  Scheduler s(SchedulerConfig{});
  auto refused = s.learnNodes({gpuNode(std::string(100000, 'x'), 8)}, nullptr);
  REQUIRE(refused.size() == 1);
  CHECK_THAT(refused[0].second, Catch::Contains("1 to 253 characters"));
  CHECK(s.nodeCount() == 0);
}
