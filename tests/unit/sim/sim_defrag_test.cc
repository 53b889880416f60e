// The defragmentation advisor: the known best move on a hand-built cluster, and on random
// clusters that moves keep every node valid and the reported gain matches a fresh measure.
#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "support/fixtures.h"
#include "troupe/model/node.h"
#include "troupe/sched/policies/policy_registry.h"
#include "troupe/sched/score/placement.h"
#include "troupe/sim/defrag.h"

namespace {

using troupe::model::Allocation;
using troupe::model::NodeState;
using troupe::sched::GpuRequest;
using troupe::sched::RequestMix;

GpuRequest shape(int gpus, int64_t milli, int64_t cpu) {
  GpuRequest r;
  r.gpus = gpus;
  r.milli_per_gpu = gpus > 0 ? milli : 1000;
  r.cpu_milli = cpu;
  return r;
}

NodeState node(troupe::model::TopologyCatalog& catalog, const std::string& name, int gpus,
               const std::string& cpu = "") {
  troupe::model::NodeFacts facts = troupe::testing::gpuNode(name, gpus);
  facts.cpu = cpu;
  return NodeState(troupe::model::nodeFromFacts(facts, catalog).value());
}

// Pods by uid, so the advisor can ask what a running pod requests.
struct Pods {
  std::map<std::string, GpuRequest> requests;
  void place(NodeState& n, const std::string& uid, const GpuRequest& req, std::vector<int> gpus) {
    Allocation a;
    a.pod_uid = uid;
    a.node = n.info().name;
    a.gpus = std::move(gpus);
    a.milli_per_gpu = req.milli_per_gpu;
    a.cpu_milli = req.cpu_milli;
    REQUIRE(n.add(a).isOk());
    requests[uid] = req;
  }
};

std::map<std::string, std::string> podsByNode(const std::vector<NodeState>& nodes) {
  std::map<std::string, std::string> out;
  for (const NodeState& n : nodes) {
    for (const auto& [uid, a] : n.allocations()) out[uid] = n.info().name;
  }
  return out;
}

TEST_CASE("defrag: two half-empty 8-GPU nodes, moving one pod frees a whole node", "[sim][defrag]") {
  troupe::model::TopologyCatalog catalog;
  std::vector<NodeState> nodes;
  nodes.push_back(node(catalog, "a", 8));
  nodes.push_back(node(catalog, "b", 8));
  Pods pods;
  pods.place(nodes[0], "p-a", shape(1, 1000, 0), {0});
  pods.place(nodes[1], "p-b", shape(1, 1000, 0), {3});
  // The cluster sees only 8-GPU requests: a node with any pod on it is wholly fragmented.
  const RequestMix mix = RequestMix::fromRequests({shape(8, 1000, 0)});
  troupe::sched::FragmentationCache measure(mix);
  const troupe::sched::PolicyPtr fgd = troupe::sched::builtinPolicies().create("fgd").value();
  troupe::sim::DefragInput in;
  in.policy = fgd.get();
  in.policy_context = {&mix, nullptr};
  in.measure = &measure;
  in.request_of = [&](const Allocation& a) { return pods.requests.at(a.pod_uid); };

  SECTION("K = 0 changes nothing") {
    const auto before = podsByNode(nodes);
    const troupe::sim::DefragPlan plan = troupe::sim::planDefrag(nodes, in);
    CHECK(plan.moves.empty());
    CHECK(plan.before_milli == Approx(14000));
    CHECK(plan.after_milli == Approx(14000));
    CHECK(podsByNode(nodes) == before);
  }
  SECTION("one move empties a node; no second move helps") {
    in.max_moves = 4;
    const troupe::sim::DefragPlan plan = troupe::sim::planDefrag(nodes, in);
    REQUIRE(plan.moves.size() == 1);
    // Equal gains either way: the first node's pod goes, to the second.
    CHECK(plan.moves[0].pod_uid == "p-a");
    CHECK(plan.moves[0].from == 0);
    CHECK(plan.moves[0].to == 1);
    CHECK(plan.moves[0].gpus.size() == 1);
    CHECK(plan.moves[0].gain_milli == Approx(8000));  // 7 + 7 fragmented GPUs become 0 + 6
    CHECK(plan.before_milli == Approx(14000));
    CHECK(plan.after_milli == Approx(6000));
    CHECK(nodes[0].podCount() == 0);
    CHECK(nodes[1].podCount() == 2);
    CHECK(nodes[1].find("p-a")->node == "b");
  }
}

TEST_CASE("defrag: on random clusters moves keep nodes valid and the gain is the measure's fall",
          "[sim][defrag]") {
  const RequestMix mix = RequestMix::fromRequests(
      {shape(1, 1000, 4000), shape(1, 1000, 4000), shape(2, 1000, 8000), shape(4, 1000, 16000),
       shape(1, 500, 2000), shape(1, 250, 2000), shape(8, 1000, 32000), shape(0, 0, 1000)});
  const std::vector<GpuRequest> shapes = {shape(1, 1000, 4000), shape(2, 1000, 8000), shape(4, 1000, 16000),
                                          shape(1, 500, 2000),  shape(1, 250, 2000),  shape(0, 0, 1000)};
  size_t total_moves = 0;  // the checks below must see moves, not only empty plans
  for (const char* policy_name : {"fgd", "troupe", "best-fit"}) {
    const troupe::sched::PolicyPtr policy = troupe::sched::builtinPolicies().create(policy_name).value();
    for (uint32_t seed = 1; seed <= 12; ++seed) {
      INFO(policy_name << " seed " << seed);
      std::mt19937 rng(seed);
      troupe::model::TopologyCatalog catalog;
      std::vector<NodeState> nodes;
      for (int i = 0; i < 10; ++i) {
        nodes.push_back(node(catalog, "n" + std::to_string(i), rng() % 2 ? 8 : 4, rng() % 2 ? "64" : "32"));
      }
      Pods pods;
      const troupe::sched::ScoreContext ctx{&mix, nullptr};
      // Fill at random: each pod on a random node that fits, on the GPUs the policy picks.
      for (int p = 0; p < 60; ++p) {
        const GpuRequest& req = shapes[rng() % shapes.size()];
        NodeState& n = nodes[rng() % nodes.size()];
        if (troupe::sched::findMisfit(n, req) != troupe::sched::Misfit::kNone) continue;
        pods.place(n, "p" + std::to_string(p), req, policy->score(n, req, ctx).placement.gpus);
      }
      const auto before = podsByNode(nodes);
      troupe::sched::FragmentationCache measure(mix);
      troupe::sim::DefragInput in;
      in.policy = policy.get();
      in.policy_context = ctx;
      in.measure = &measure;
      in.request_of = [&](const Allocation& a) { return pods.requests.at(a.pod_uid); };
      in.max_moves = 8;
      in.candidate_pods = seed % 2 ? 0 : 5;  // every pod, and the restricted search
      const troupe::sim::DefragPlan plan = troupe::sim::planDefrag(nodes, in);
      CHECK(plan.moves.size() <= 8);
      total_moves += plan.moves.size();

      const auto after = podsByNode(nodes);
      CHECK(after.size() == before.size());  // no pod lost or doubled
      for (const auto& [uid, where] : before) CHECK(after.count(uid) == 1);
      for (const NodeState& n : nodes) {
        int64_t cpu = 0;
        std::vector<int64_t> used(static_cast<size_t>(n.gpuCount()), 0);
        for (const auto& [uid, a] : n.allocations()) {
          cpu += a.cpu_milli;
          CHECK(static_cast<int>(a.gpus.size()) == pods.requests.at(uid).gpus);
          for (int g : a.gpus) {
            REQUIRE(g >= 0);
            REQUIRE(g < n.gpuCount());
            used[static_cast<size_t>(g)] += a.milli_per_gpu;
          }
        }
        CHECK(cpu <= n.info().cpu_milli);
        for (int64_t u : used) CHECK(u <= troupe::model::kMilliPerGpu);
      }
      double gains = 0;
      std::map<std::string, std::string> moved_to;  // a pod's last move says where it is
      for (const troupe::sim::DefragMove& m : plan.moves) {
        CHECK(m.gain_milli > 0);
        CHECK(m.from != m.to);
        moved_to[m.pod_uid] = nodes[m.to].info().name;
        gains += m.gain_milli;
      }
      for (const auto& [uid, where] : moved_to) CHECK(after.at(uid) == where);
      troupe::sched::FragmentationCache fresh(mix);
      const double recomputed = troupe::sim::fragmentedMilli(nodes, fresh);
      CHECK(plan.after_milli == Approx(recomputed));
      CHECK(plan.before_milli - gains == Approx(recomputed).margin(1e-6));
    }
  }
  CHECK(total_moves >= 10);
}

}  // namespace
