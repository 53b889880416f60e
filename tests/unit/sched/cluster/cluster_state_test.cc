// ClusterState: the node model's ordinals and births, and the pods' allocations on it.
#include "troupe/sched/cluster/cluster_state.h"

#include <catch2/catch.hpp>
#include <initializer_list>
#include <string>

#include "support/fixtures.h"

namespace {

using troupe::model::Allocation;
using troupe::sched::ClusterState;

// A cluster model with 8-GPU nodes of the given names.
struct Nodes {
  troupe::model::TopologyCatalog catalog;
  ClusterState cluster;
  explicit Nodes(std::initializer_list<const char*> names) {
    for (const char* name : names) add(name, 8);
  }
  void add(const std::string& name, int gpus) {
    const troupe::model::NodeFacts facts = troupe::testing::gpuNode(name, gpus);
    auto info = troupe::model::nodeFromFacts(facts, catalog);
    REQUIRE(info.isOk());
    cluster.upsert(std::move(info).value(), troupe::sched::factsFingerprint(facts));
  }
};

Allocation allocation(const std::string& uid, const std::string& node, std::vector<int> gpus) {
  Allocation a;
  a.pod_uid = uid;
  a.pod_key = "ns/" + uid;
  a.node = node;
  a.gpus = std::move(gpus);
  return a;
}

}  // namespace

TEST_CASE("cluster state: a removed node's ordinal is reused, and the births tell the new node apart",
          "[scheduler][cluster-state]") {
  Nodes nodes{"a", "b"};
  ClusterState& cluster = nodes.cluster;
  const uint32_t a_ordinal = cluster.find("a")->ordinal();
  CHECK(cluster.find("b")->ordinal() != a_ordinal);
  const uint64_t seen = cluster.births();  // e.g. a pod's filter passed "a" now
  CHECK(cluster.bornBy(*cluster.find("a"), seen));

  REQUIRE(cluster.remove("a") == a_ordinal);
  CHECK_FALSE(cluster.remove("a"));
  nodes.add("c", 8);
  REQUIRE(cluster.find("c"));
  CHECK(cluster.find("c")->ordinal() == a_ordinal);
  CHECK_FALSE(cluster.bornBy(*cluster.find("c"), seen));  // not the node the pod passed
  CHECK(cluster.bornBy(*cluster.find("b"), seen));
  CHECK(cluster.index().find("c") == cluster.find("c"));
  CHECK(cluster.index().find("a") == nullptr);
  CHECK(cluster.size() == 2);
}

TEST_CASE("cluster state: unchanged facts are recognised; an update keeps the allocations",
          "[scheduler][cluster-state]") {
  Nodes nodes{"a"};
  ClusterState& cluster = nodes.cluster;
  const auto facts = troupe::testing::gpuNode("a", 8);
  CHECK(cluster.unchanged("a", troupe::sched::factsFingerprint(facts)));
  CHECK_FALSE(cluster.unchanged("a", troupe::sched::factsFingerprint(troupe::testing::gpuNode("a", 4))));
  CHECK_FALSE(cluster.unchanged("nope", troupe::sched::factsFingerprint(facts)));
  REQUIRE(cluster.record(allocation("p1", "a", {0, 1})).isOk());
  nodes.add("a", 4);
  REQUIRE(cluster.allocationOf("p1"));
  CHECK(cluster.allocationOf("p1")->gpus == std::vector<int>{0, 1});
}

TEST_CASE("cluster state: allocations are recorded once, refused with a reason, and released",
          "[scheduler][cluster-state]") {
  Nodes nodes{"a", "b"};
  ClusterState& cluster = nodes.cluster;

  troupe::Status unknown = cluster.record(allocation("p0", "zz", {0}));
  CHECK(unknown.code() == troupe::Code::kNotFound);
  CHECK_THAT(unknown.message(), Catch::Contains("node zz is unknown"));

  REQUIRE(cluster.record(allocation("p1", "a", {0, 1})).isOk());
  REQUIRE(cluster.nodeOf("p1"));
  CHECK(*cluster.nodeOf("p1") == "a");
  troupe::Status twice = cluster.record(allocation("p1", "b", {0}));
  CHECK_THAT(twice.message(), Catch::Contains("pod ns/p1 already holds GPUs on node a"));
  CHECK_FALSE(cluster.record(allocation("p2", "a", {1})).isOk());  // GPU 1 is taken
  CHECK_FALSE(cluster.nodeOf("p2"));

  CHECK(cluster.release("p1"));
  CHECK_FALSE(cluster.release("p1"));
  CHECK_FALSE(cluster.allocationOf("p1"));
  CHECK(cluster.find("a")->wholeFreeCount() == 8);
}

TEST_CASE("cluster state: a hold takes GPUs without a pod record; removing the node forgets its pods",
          "[scheduler][cluster-state]") {
  Nodes nodes{"a"};
  ClusterState& cluster = nodes.cluster;
  REQUIRE(cluster.hold(allocation("gang-hold/ns/g@1#0", "a", {0, 1, 2, 3})).isOk());
  CHECK_FALSE(cluster.nodeOf("gang-hold/ns/g@1#0"));
  CHECK(cluster.find("a")->wholeFreeCount() == 4);
  CHECK_FALSE(cluster.record(allocation("p1", "a", {0})).isOk());
  cluster.unhold("a", "gang-hold/ns/g@1#0");
  cluster.unhold("gone", "gang-hold/ns/g@1#0");  // nothing to do
  CHECK(cluster.find("a")->wholeFreeCount() == 8);

  REQUIRE(cluster.record(allocation("p1", "a", {0})).isOk());
  REQUIRE(cluster.remove("a"));
  CHECK_FALSE(cluster.nodeOf("p1"));
}

TEST_CASE("cluster state: the summary counts GPUs per product and per node", "[scheduler][cluster-state]") {
  Nodes nodes{"b", "a"};
  ClusterState& cluster = nodes.cluster;
  REQUIRE(cluster.record(allocation("p1", "a", {0, 1, 2})).isOk());
  troupe::sched::ClusterSummary s;
  cluster.summarize(s, 10);
  REQUIRE(s.by_product.size() == 1);
  CHECK(s.by_product[0].nodes == 2);
  CHECK(s.by_product[0].gpus == 16);
  CHECK(s.by_product[0].whole_free == 13);
  CHECK(s.by_product[0].nodes_with_free_8 == 1);
  REQUIRE(s.by_node.size() == 2);
  CHECK(s.by_node[0].node == "a");  // sorted by name
  CHECK(s.by_node[0].used_milli == 3000);
  CHECK(s.pods == 1);
  CHECK(s.fragmented_gpus == 5);  // 5 free on "a" below its 8-GPU size

  troupe::sched::ClusterSummary few;
  cluster.summarize(few, 1);
  CHECK(few.node_rows_omitted);
  CHECK(few.by_node.empty());
}

TEST_CASE("cluster state: CPU per GPU sums the GPU nodes that track CPU, through updates and removals",
          "[scheduler][cluster-state]") {
  troupe::model::TopologyCatalog catalog;
  ClusterState cluster;
  auto upsert = [&](const std::string& name, int gpus, const std::string& cpu) {
    troupe::model::NodeFacts facts = troupe::testing::gpuNode(name, gpus);
    facts.cpu = cpu;
    auto info = troupe::model::nodeFromFacts(facts, catalog);
    REQUIRE(info.isOk());
    cluster.upsert(std::move(info).value(), troupe::sched::factsFingerprint(facts));
  };
  CHECK(cluster.cpuPerGpu() == 0.0);
  upsert("a", 8, "96");  // 12 cores per GPU: 12 milli-CPU per milli-GPU
  CHECK(cluster.cpuPerGpu() == Approx(12.0));
  upsert("b", 2, "104");
  CHECK(cluster.cpuPerGpu() == Approx(200.0 / 10.0));
  upsert("cpu-only", 0, "256");  // its CPU is no use to GPU pods
  upsert("untracked", 4, "");    // CPU unknown: left out of both sums
  CHECK(cluster.cpuPerGpu() == Approx(20.0));
  upsert("a", 8, "64");  // an update replaces the node's share
  CHECK(cluster.cpuPerGpu() == Approx(168.0 / 10.0));
  REQUIRE(cluster.remove("b"));
  CHECK(cluster.cpuPerGpu() == Approx(8.0));
  REQUIRE(cluster.remove("a"));
  CHECK(cluster.cpuPerGpu() == 0.0);
}
