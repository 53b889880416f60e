// Live defragmentation advice: known answers on hand-built clusters (a pod, a gang, no plan,
// pinned and gang pods stay), and on random clusters that any plan, carried out on a copy,
// leaves every node valid and makes the waiting request fit.
#include "troupe/sched/defrag/defrag_advice.h"

#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "support/fixtures.h"
#include "troupe/model/node.h"
#include "troupe/sched/gang/gang_planner.h"
#include "troupe/sched/policies/policy_registry.h"
#include "troupe/sched/scheduler/scheduler.h"
#include "troupe/sched/score/placement.h"

namespace {

using troupe::model::Allocation;
using troupe::model::NodeState;
using troupe::sched::DefragAdvice;
using troupe::sched::DefragAsk;
using troupe::sched::DefragInput;
using troupe::sched::GpuRequest;
using Outcome = troupe::sched::DefragAdvice::Outcome;

GpuRequest whole(int gpus, troupe::sched::TopologyMode topology = troupe::sched::TopologyMode::kPreferred) {
  GpuRequest r;
  r.gpus = gpus;
  r.topology = topology;
  return r;
}

NodeState node(troupe::model::TopologyCatalog& catalog, const std::string& name, int gpus,
               const std::string& cpu = "") {
  troupe::model::NodeFacts facts = troupe::testing::gpuNode(name, gpus);
  facts.cpu = cpu;
  return NodeState(troupe::model::nodeFromFacts(facts, catalog).value());
}

void place(NodeState& n, const std::string& uid, std::vector<int> gpus, int64_t milli = 1000,
           const std::string& gang = "", int64_t cpu = 0) {
  Allocation a;
  a.pod_uid = uid;
  a.pod_key = "ns/" + uid;
  a.node = n.info().name;
  a.gpus = std::move(gpus);
  a.milli_per_gpu = milli;
  a.gang = gang;
  a.cpu_milli = cpu;
  REQUIRE(n.add(a).isOk());
}

struct Fixture {
  troupe::model::TopologyCatalog catalog;
  std::vector<NodeState> nodes;
  troupe::sched::PolicyPtr policy = troupe::sched::builtinPolicies().create("troupe").value();

  DefragInput input(int max_moves = 4) const {
    DefragInput in;
    for (const NodeState& n : nodes) in.nodes.push_back(&n);
    in.policy = policy.get();
    in.max_moves = max_moves;
    in.topology_levels = troupe::model::defaultTopologyLevels();
    return in;
  }
};

// The plan carried out on copies of the nodes; fails the test if a move is invalid.
std::vector<NodeState> carryOut(const std::vector<NodeState>& nodes, const DefragAdvice& advice) {
  std::vector<NodeState> out = nodes;
  auto byName = [&](const std::string& name) -> NodeState& {
    for (NodeState& n : out) {
      if (n.info().name == name) return n;
    }
    FAIL("no node " << name);
    return out.front();
  };
  for (const auto& freed : advice.freed) {
    for (const auto& m : freed.moves) {
      NodeState& from = byName(m.from);
      NodeState& to = byName(m.to);
      REQUIRE(m.from != m.to);
      const Allocation* a = from.find(m.pod_uid);
      REQUIRE(a != nullptr);
      CHECK(a->gang.empty());
      Allocation moved = *a;
      moved.node = m.to;
      moved.gpus = m.gpus;
      REQUIRE(moved.gpus.size() == a->gpus.size());
      REQUIRE(from.remove(m.pod_uid));
      GpuRequest req;
      req.gpus = static_cast<int>(moved.gpus.size());
      req.milli_per_gpu = moved.milli_per_gpu;
      req.cpu_milli = moved.cpu_milli;
      CHECK(troupe::sched::findMisfit(to, req) == troupe::sched::Misfit::kNone);
      REQUIRE(to.add(moved).isOk());  // add refuses an over-committed GPU
    }
  }
  return out;
}

bool fitsSomewhere(const std::vector<NodeState>& nodes, const GpuRequest& req) {
  for (const NodeState& n : nodes) {
    if (troupe::sched::findMisfit(n, req) == troupe::sched::Misfit::kNone &&
        troupe::sched::placeOnNode(n, req).has_value())
      return true;
  }
  return false;
}

bool gangFits(const std::vector<NodeState>& nodes, const GpuRequest& req, int members) {
  std::vector<const NodeState*> view;
  for (const NodeState& n : nodes) view.push_back(&n);
  return static_cast<int>(
             troupe::sched::planGang(view, req, members, "g", troupe::model::defaultTopologyLevels())
                 .slots.size()) == members;
}

}  // namespace

TEST_CASE("defrag advice: two half-used 8-GPU nodes, one 1-GPU move frees 8 connected GPUs",
          "[sched][defrag_advice]") {
  Fixture f;
  f.nodes.push_back(node(f.catalog, "a", 8));
  f.nodes.push_back(node(f.catalog, "b", 8));
  place(f.nodes[0], "small", {0});
  place(f.nodes[1], "big", {0, 1, 2, 3});
  const DefragAsk ask{"ns/train", whole(8, troupe::sched::TopologyMode::kNVLink), 1};
  const DefragAdvice advice = troupe::sched::planDefragAdvice(ask, f.input());
  REQUIRE(advice.outcome == Outcome::kPlan);
  REQUIRE(advice.freed.size() == 1);
  CHECK(advice.moves == 1);
  CHECK(advice.milli_moved == 1000);
  CHECK(advice.freed[0].node == "a");
  REQUIRE(advice.freed[0].moves.size() == 1);
  CHECK(advice.freed[0].moves[0].pod_uid == "small");
  CHECK(advice.freed[0].moves[0].to == "b");
  CHECK(advice.freed[0].free_gpus_after == 8);
  CHECK(advice.freed[0].connected_after == 8);
  CHECK(troupe::sched::describeDefragAdvice(advice, true) ==
        "moving pod ns/small from node a to node b would free 8 connected GPUs on a");
  const std::vector<NodeState> after = carryOut(f.nodes, advice);
  CHECK(fitsSomewhere(after, ask.request));
  // The caller's nodes are untouched.
  CHECK(f.nodes[0].find("small") != nullptr);
}

TEST_CASE("defrag advice: fewest moves wins over the node order", "[sched][defrag_advice]") {
  Fixture f;
  f.nodes.push_back(node(f.catalog, "a", 8));
  f.nodes.push_back(node(f.catalog, "b", 8));
  f.nodes.push_back(node(f.catalog, "c", 8));
  place(f.nodes[0], "a1", {0});
  place(f.nodes[0], "a2", {1});
  place(f.nodes[1], "b1", {0, 1});  // one move, two GPUs: fewer moves beat fewer GPUs
  place(f.nodes[2], "c1", {0, 1, 2, 3});
  place(f.nodes[2], "c2", {4, 5});
  const DefragAdvice advice = troupe::sched::planDefragAdvice({"ns/p", whole(8), 1}, f.input());
  REQUIRE(advice.outcome == Outcome::kPlan);
  REQUIRE(advice.freed.size() == 1);
  CHECK(advice.freed[0].node == "b");
  CHECK(advice.moves == 1);
  CHECK(advice.milli_moved == 2000);
}

TEST_CASE("defrag advice: a gang of 2x8 gets two nodes freed", "[sched][defrag_advice]") {
  Fixture f;
  for (const char* name : {"a", "b", "c"}) f.nodes.push_back(node(f.catalog, name, 8));
  place(f.nodes[0], "a1", {0});
  place(f.nodes[1], "b1", {0});
  place(f.nodes[2], "c1", {0, 1, 2, 3});
  const DefragAsk ask{"ns/gang", whole(8), 2};
  REQUIRE_FALSE(gangFits(f.nodes, ask.request, 2));
  const DefragAdvice advice = troupe::sched::planDefragAdvice(ask, f.input());
  REQUIRE(advice.outcome == Outcome::kPlan);
  REQUIRE(advice.freed.size() == 2);
  CHECK(advice.moves == 2);
  CHECK(advice.freed[0].node == "a");
  CHECK(advice.freed[1].node == "b");
  for (const auto& freed : advice.freed) {
    REQUIRE(freed.moves.size() == 1);
    CHECK(freed.moves[0].to == "c");  // never onto a node freed for the gang
  }
  CHECK(advice.freedGpus() == 16);
  CHECK(gangFits(carryOut(f.nodes, advice), ask.request, 2));

  SECTION("with one move allowed there is no plan") {
    const DefragAdvice one = troupe::sched::planDefragAdvice(ask, f.input(1));
    CHECK(one.outcome == Outcome::kNoPlan);
    CHECK(one.freed.empty());
    CHECK(one.reason.find("at most 1 moves") != std::string::npos);
  }
}

TEST_CASE("defrag advice: no plan, and what never moves", "[sched][defrag_advice]") {
  Fixture f;
  f.nodes.push_back(node(f.catalog, "a", 8));
  f.nodes.push_back(node(f.catalog, "b", 8));

  SECTION("a pod that fits now needs no advice") {
    place(f.nodes[0], "a1", {0});
    CHECK(troupe::sched::planDefragAdvice({"ns/p", whole(4), 1}, f.input()).outcome == Outcome::kFitsNow);
  }
  SECTION("nowhere to put the moved pods") {
    place(f.nodes[0], "a1", {0, 1, 2, 3});
    place(f.nodes[0], "a2", {4, 5, 6, 7});
    place(f.nodes[1], "b1", {0, 1, 2, 3, 4});
    const DefragAdvice advice = troupe::sched::planDefragAdvice({"ns/p", whole(8), 1}, f.input());
    CHECK(advice.outcome == Outcome::kNoPlan);
    CHECK(advice.reason.find("no node could be freed for the pod with at most 4 moves") != std::string::npos);
  }
  SECTION("gang members and pinned pods stay") {
    place(f.nodes[0], "member", {0}, 1000, "ns/g");
    place(f.nodes[1], "held", {0});
    DefragInput in = f.input();
    in.pinned = {"held"};
    CHECK(troupe::sched::planDefragAdvice({"ns/p", whole(8), 1}, in).outcome == Outcome::kNoPlan);
    in.pinned.clear();
    const DefragAdvice advice = troupe::sched::planDefragAdvice({"ns/p", whole(8), 1}, in);
    REQUIRE(advice.outcome == Outcome::kPlan);
    CHECK(advice.freed[0].node == "b");
    CHECK(advice.freed[0].moves[0].pod_uid == "held");
  }
  SECTION("more moves than allowed") {
    for (int g = 0; g < 5; ++g) place(f.nodes[0], "a" + std::to_string(g), {g});
    for (int g = 0; g < 5; ++g) place(f.nodes[1], "b" + std::to_string(g), {g});
    CHECK(troupe::sched::planDefragAdvice({"ns/p", whole(8), 1}, f.input()).outcome == Outcome::kNoPlan);
  }
  SECTION("a cordoned node is neither freed nor a target") {
    place(f.nodes[0], "a1", {0});
    troupe::model::NodeInfo info = f.nodes[1].info();
    info.unschedulable = true;
    f.nodes[1].setInfo(info);
    CHECK(troupe::sched::planDefragAdvice({"ns/p", whole(8), 1}, f.input()).outcome == Outcome::kNoPlan);
  }
}

TEST_CASE("defrag advice: on random clusters a plan keeps nodes valid and makes the request fit",
          "[sched][defrag_advice]") {
  const std::vector<std::pair<int, int64_t>> shapes = {{1, 1000}, {2, 1000}, {4, 1000},
                                                       {1, 500},  {1, 250},  {3, 1000}};
  size_t plans = 0, gang_plans = 0, no_plans = 0;
  for (const char* policy_name : {"troupe", "best-fit", "spread"}) {
    for (uint32_t seed = 1; seed <= 40; ++seed) {
      INFO(policy_name << " seed " << seed);
      std::mt19937 rng(seed);
      Fixture f;
      f.policy = troupe::sched::builtinPolicies().create(policy_name).value();
      const int n_nodes = 3 + static_cast<int>(rng() % 6);
      for (int i = 0; i < n_nodes; ++i)
        f.nodes.push_back(node(f.catalog, "n" + std::to_string(i), rng() % 3 ? 8 : 4, rng() % 2 ? "64" : ""));
      const int n_pods = 8 + static_cast<int>(rng() % 32);
      for (int p = 0; p < n_pods; ++p) {
        const auto [gpus, milli] = shapes[rng() % shapes.size()];
        GpuRequest req = whole(gpus);
        req.milli_per_gpu = milli;
        req.cpu_milli = (rng() % 3) * 8000;
        NodeState& n = f.nodes[rng() % f.nodes.size()];
        if (troupe::sched::findMisfit(n, req) != troupe::sched::Misfit::kNone) continue;
        const std::vector<int> at = f.policy->score(n, req, {}).placement.gpus;
        if (static_cast<int>(at.size()) != gpus) continue;
        place(n, "p" + std::to_string(p), at, milli, rng() % 5 == 0 ? "ns/gang" : "", req.cpu_milli);
      }
      std::set<std::string> pinned;
      for (const NodeState& n : f.nodes) {
        for (const auto& [uid, a] : n.allocations()) {
          if (rng() % 6 == 0) pinned.insert(uid);
        }
      }
      const int members = rng() % 3 == 0 ? 2 : 1;
      const DefragAsk ask{"ns/wait",
                          whole(rng() % 2 ? 8 : 4, rng() % 2 ? troupe::sched::TopologyMode::kNVLink
                                                             : troupe::sched::TopologyMode::kPreferred),
                          members};
      DefragInput in = f.input(1 + static_cast<int>(rng() % 4));
      in.pinned = pinned;
      const DefragAdvice advice = troupe::sched::planDefragAdvice(ask, in);
      const bool fits_now =
          members == 1 ? fitsSomewhere(f.nodes, ask.request) : gangFits(f.nodes, ask.request, members);
      CHECK((advice.outcome == Outcome::kFitsNow) == fits_now);
      if (advice.outcome != Outcome::kPlan) {
        CHECK(advice.freed.empty());
        if (advice.outcome == Outcome::kNoPlan) {
          CHECK_FALSE(advice.reason.empty());
          ++no_plans;
        }
        continue;
      }
      ++plans;
      gang_plans += members > 1 ? 1 : 0;
      CHECK(advice.moves <= in.max_moves);
      int counted = 0;
      for (const auto& freed : advice.freed) {
        for (const auto& m : freed.moves) {
          ++counted;
          CHECK_FALSE(pinned.contains(m.pod_uid));
        }
      }
      CHECK(counted == advice.moves);
      // carryOut checks each move (gang members never move, GPUs never over-committed, CPU
      // within capacity through findMisfit).
      const std::vector<NodeState> after = carryOut(f.nodes, advice);
      for (const NodeState& n : after) {
        if (n.info().cpu_milli > 0) CHECK(n.cpuUsed() <= n.info().cpu_milli);
        for (int g = 0; g < n.gpuCount(); ++g) CHECK(n.gpuUsedMilli(g) <= 1000);
      }
      CHECK((members == 1 ? fitsSomewhere(after, ask.request) : gangFits(after, ask.request, members)));
    }
  }
  // The checks above must have seen plans, gang plans and refusals, not only one kind.
  INFO("plans " << plans << ", gang plans " << gang_plans << ", no plans " << no_plans);
  CHECK(plans >= 10);
  CHECK(gang_plans >= 2);
  CHECK(no_plans >= 5);
}

TEST_CASE("defrag advice through the Scheduler: its nodes in name order, the caller's pins",
          "[sched][defrag_advice]") {
  troupe::sched::Scheduler s{troupe::sched::SchedulerConfig{}};
  // Upserted out of name order: the advice must not depend on the model's order.
  for (const char* name : {"c", "a", "b"}) REQUIRE(s.upsertNode(troupe::testing::gpuNode(name, 8)).isOk());
  auto hold = [&](const std::string& uid, const std::string& node, std::vector<int> gpus) {
    Allocation a;
    a.pod_uid = uid;
    a.pod_key = "ns/" + uid;
    a.node = node;
    a.gpus = std::move(gpus);
    REQUIRE(s.recordAllocation(a).isOk());
  };
  hold("c1", "c", {0});
  hold("a1", "a", {0});
  hold("b1", "b", {0, 1, 2, 3});
  const DefragAsk ask{"ns/big", whole(8), 1};
  DefragAdvice advice = s.adviseDefrag(ask, {}, 4);
  REQUIRE(advice.outcome == Outcome::kPlan);
  CHECK(advice.freed[0].node == "a");  // a and c tie; a comes first by name
  CHECK(advice.freed[0].moves[0].to == "b");
  advice = s.adviseDefrag(ask, {"a1"}, 4);
  REQUIRE(advice.outcome == Outcome::kPlan);
  CHECK(advice.freed[0].node == "c");
  // Both 1-GPU pods pinned: the 4-GPU pod moves instead.
  advice = s.adviseDefrag(ask, {"a1", "c1"}, 4);
  REQUIRE(advice.outcome == Outcome::kPlan);
  CHECK(advice.freed[0].node == "b");
  CHECK(advice.milli_moved == 4000);
  CHECK(s.adviseDefrag(ask, {"a1", "b1", "c1"}, 4).outcome == Outcome::kNoPlan);
  CHECK(s.adviseDefrag({"ns/small", whole(2), 1}, {}, 4).outcome == Outcome::kFitsNow);
}
