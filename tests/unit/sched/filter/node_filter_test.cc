// The single-pod filter loop and narrowing (node_filter.h), called directly on a cluster model:
// each distinct misfit worded once, rejections counted per category, drained nodes kept for
// their gang, and narrowing choosing exactly bestByValue's node, with remembered values counted.
#include "troupe/sched/filter/node_filter.h"

#include <catch2/catch.hpp>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "support/fixtures.h"
#include "troupe/sched/cluster/cluster_state.h"
#include "troupe/sched/policies/policy_registry.h"
#include "troupe/sched/score/best_node.h"

namespace troupe::sched {
namespace {

using model::NodeState;

constexpr const char* kH100 = "NVIDIA-H100-80GB-HBM3";

// `n` whole GPUs of one of `models` (empty: any).
GpuRequest wholeGpus(int n, std::vector<std::string> models = {}) {
  GpuRequest r;
  r.gpus = n;
  r.models = std::move(models);
  return r;
}

void addNode(ClusterState& cluster, const std::string& name, int gpus, const std::string& product = kH100) {
  model::TopologyCatalog catalog;
  const auto facts = testing::gpuNode(name, gpus, product);
  auto info = model::nodeFromFacts(facts, catalog);
  REQUIRE(info.isOk());
  cluster.upsert(std::move(info).value(), factsFingerprint(facts));
}

void hold(ClusterState& cluster, const std::string& node, const std::string& uid, std::vector<int> gpus) {
  model::Allocation a;
  a.pod_uid = uid;
  a.pod_key = "default/" + uid;
  a.node = node;
  a.gpus = std::move(gpus);
  const auto st = cluster.record(a);
  INFO(st.message());
  REQUIRE(st.isOk());
}

}  // namespace

TEST_CASE("node filter: each distinct misfit is worded once and every rejection is counted",
          "[scheduler][node-filter]") {
  ClusterState cluster;
  addNode(cluster, "free", 8);
  addNode(cluster, "busy-1", 8);
  addNode(cluster, "busy-2", 8);
  hold(cluster, "busy-1", "u1", {0, 1, 2, 3, 4, 5});
  hold(cluster, "busy-2", "u2", {2, 3, 4, 5, 6, 7});
  addNode(cluster, "small-1", 2);
  addNode(cluster, "small-2", 2);
  addNode(cluster, "l40s-1", 8, "NVIDIA-L40S");
  addNode(cluster, "l40s-2", 8, "NVIDIA-L40S");
  addNode(cluster, "a100", 8, "NVIDIA-A100-SXM4-80GB");
  const std::vector<std::string> names = {"free",   "busy-1", "small-1", "ghost",  "l40s-1",
                                          "busy-2", "a100",   "small-2", "l40s-2", "free"};

  SECTION("misfits of one kind share one reason; products get one model reason each") {
    const GpuRequest req = wholeGpus(4, {kH100});
    std::vector<const NodeState*> passed_nodes;
    const FilterResult r = filterEachNode(cluster.index(), req, names, DrainOwner{}, "", &passed_nodes);
    CHECK(r.passed == std::vector<std::string>{"free", "free"});
    REQUIRE(passed_nodes.size() == 2);
    CHECK(passed_nodes[0] == cluster.find("free"));
    CHECK(passed_nodes[1] == cluster.find("free"));
    // Busy nodes may make room (failed); the rest never fit (unresolvable).
    CHECK(r.failed.size() == 2);
    CHECK(r.failed.reasons().size() == 1);
    CHECK(r.failed.at("busy-1") == r.failed.at("busy-2"));
    CHECK(r.unresolvable.size() == 6);
    CHECK(r.unresolvable.at("small-1") == r.unresolvable.at("small-2"));
    CHECK(r.unresolvable.at("l40s-1") == r.unresolvable.at("l40s-2"));
    CHECK(r.unresolvable.at("l40s-1") != r.unresolvable.at("a100"));
    CHECK(r.unresolvable.at("ghost").find("unknown to Troupe") != std::string::npos);
    // count, two model wordings (one per product), unknown node: four distinct reasons.
    CHECK(r.unresolvable.reasons().size() == 4);
    const std::map<std::string, int> categories = {
        {"busy", 2}, {"count", 2}, {"model", 3}, {"unknown-node", 1}};
    CHECK(r.categories == categories);
  }

  SECTION("a pod that wants no GPUs passes every known node") {
    const FilterResult r = filterEachNode(cluster.index(), wholeGpus(0), names, DrainOwner{});
    CHECK(r.passed.size() == names.size() - 1);
    CHECK(r.failed.empty());
    CHECK(r.categories == std::map<std::string, int>{{"unknown-node", 1}});
  }

  SECTION("a drained node is kept for its own gang only") {
    const DrainOwner drains = [](const std::string& node) { return node == "free" ? "team/g1" : ""; };
    const std::vector<std::string> two = {"free", "busy-1"};
    const FilterResult other = filterEachNode(cluster.index(), wholeGpus(4), two, drains, "team/g2");
    CHECK(other.passed.empty());
    CHECK(other.failed.at("free").find("kept free for gang team/g1") != std::string::npos);
    CHECK(other.categories == std::map<std::string, int>{{"busy", 1}, {"drain", 1}});
    const FilterResult own = filterEachNode(cluster.index(), wholeGpus(4), two, drains, "team/g1");
    CHECK(own.passed == std::vector<std::string>{"free"});
    CHECK(own.categories == std::map<std::string, int>{{"busy", 1}});
  }
}

TEST_CASE("node filter: narrowing keeps bestByValue's node and counts remembered values",
          "[scheduler][node-filter][narrow]") {
  ClusterState cluster;
  std::vector<std::string> names;
  for (int i = 0; i < 6; ++i) {
    names.push_back("n" + std::to_string(i));
    addNode(cluster, names.back(), 8);
  }
  // Partly used nodes score differently from empty ones under every packing policy.
  hold(cluster, "n3", "u1", {0, 1, 2, 3});
  hold(cluster, "n4", "u2", {0, 1});
  const auto mix = std::make_shared<const RequestMix>(RequestMix::defaults());
  const GpuRequest req = wholeGpus(4);

  for (const char* kind : {"troupe", "fgd", "binpack", "spread"}) {
    INFO(kind);
    const PolicyPtr policy = builtinPolicies().create(kind).value();
    auto narrowed = [&](ScoreMemo* memo) {
      std::vector<const NodeState*> nodes;
      FilterResult out = filterEachNode(cluster.index(), req, names, DrainOwner{}, "", &nodes);
      REQUIRE(nodes.size() == names.size());
      const int best = narrowToBest(*policy, req, mix, memo, nodes, out);
      // The same choice as bestByValue over the policy's own values for these nodes.
      const ScoreContext context{mix.get(), nullptr};
      std::vector<double> values;
      for (const NodeState* n : nodes) values.push_back(policy->rankValue(*n, req, context));
      CHECK(best == bestByValue(*policy, nodes, values));
      REQUIRE(best >= 0);
      CHECK(out.passed == std::vector<std::string>{names[static_cast<size_t>(best)]});
      return out.passed.front();
    };
    const std::string fresh = narrowed(nullptr);
    ScoreMemo memo;
    CHECK(narrowed(&memo) == fresh);
    CHECK(memo.stats().hits == 0);
    CHECK(memo.stats().misses == names.size());
    CHECK(narrowed(&memo) == fresh);
    CHECK(memo.stats().hits == names.size());
    CHECK(memo.stats().misses == names.size());
  }

  SECTION("a changed node alone is scored again") {
    const PolicyPtr policy = builtinPolicies().create("troupe").value();
    ScoreMemo memo;
    auto narrow = [&] {
      std::vector<const NodeState*> nodes;
      FilterResult out = filterEachNode(cluster.index(), req, names, DrainOwner{}, "", &nodes);
      narrowToBest(*policy, req, mix, &memo, nodes, out);
    };
    narrow();
    hold(cluster, "n0", "u3", {0});
    narrow();
    CHECK(memo.stats().misses == names.size() + 1);
    CHECK(memo.stats().hits == names.size() - 1);
  }
}

}  // namespace troupe::sched
