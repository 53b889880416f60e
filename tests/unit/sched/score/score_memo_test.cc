// ScoreMemo: narrowing values reused only while node, request and mix are unchanged; and a
// narrowing Scheduler that remembers scores chooses exactly as one that scores afresh.
#include "troupe/sched/score/score_memo.h"

#include <catch2/catch.hpp>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "support/fixtures.h"
#include "troupe/sched/scheduler/scheduler.h"

namespace {

using troupe::model::NodeState;
using troupe::sched::FilterResult;
using troupe::sched::GpuRequest;
using troupe::sched::PodFacts;
using troupe::sched::RequestMix;
using troupe::sched::Scheduler;
using troupe::sched::SchedulerConfig;
using troupe::sched::ScoreMemo;
using troupe::testing::gpuNode;
using troupe::testing::gpuPod;

NodeState makeNode(const std::string& name, uint32_t ordinal) {
  troupe::model::TopologyCatalog catalog;
  auto info = troupe::model::nodeFromFacts(gpuNode(name, 8), catalog);
  REQUIRE(info.isOk());
  NodeState n(info.value());
  n.setOrdinal(ordinal);
  return n;
}

GpuRequest gpus(int n) {
  GpuRequest r;
  r.gpus = n;
  return r;
}

}  // namespace

TEST_CASE("score memo: reuses a value only for the same node state, request and mix",
          "[scheduler][score-memo]") {
  std::vector<NodeState> states;
  for (uint32_t i = 0; i < 4; ++i) states.push_back(makeNode("n" + std::to_string(i), i));
  std::vector<const NodeState*> nodes;
  for (const NodeState& n : states) nodes.push_back(&n);
  // The score counts its calls and depends on the node's load, so a stale value would show.
  int calls = 0;
  const ScoreMemo::Score score = [&](const NodeState& n) {
    ++calls;
    return static_cast<double>(n.usedMilliTotal() + n.info().name.back());
  };
  auto expect = [&](const NodeState& n) {
    return static_cast<double>(n.usedMilliTotal() + n.info().name.back());
  };
  ScoreMemo memo;
  const auto mix = std::make_shared<const RequestMix>(RequestMix::defaults());
  std::vector<double> values(nodes.size());
  auto run = [&](const GpuRequest& req, const std::shared_ptr<const RequestMix>& m) {
    calls = 0;
    memo.values(nodes, req, m, score, values);
    for (size_t i = 0; i < nodes.size(); ++i) CHECK(values[i] == expect(*nodes[i]));
    return calls;
  };
  CHECK(run(gpus(2), mix) == 4);
  CHECK(run(gpus(2), mix) == 0);
  CHECK(memo.stats().hits == 4);

  // A bind on one node: only that node is scored again.
  troupe::model::Allocation a;
  a.pod_uid = "u1";
  a.gpus = {0, 1};
  REQUIRE(states[2].add(a).isOk());
  CHECK(run(gpus(2), mix) == 1);
  REQUIRE(states[2].remove("u1"));
  CHECK(run(gpus(2), mix) == 1);

  // Other shapes are remembered beside it, up to the ways per node.
  CHECK(run(gpus(4), mix) == 4);
  CHECK(run(gpus(2), mix) == 0);
  GpuRequest nvlink = gpus(4);
  nvlink.topology = troupe::sched::TopologyMode::kNVLink;
  CHECK(run(nvlink, mix) == 4);
  CHECK(run(gpus(1), mix) == 4);
  CHECK(run(gpus(4), mix) == 0);
  CHECK(run(gpus(8), mix) == 4);  // a fifth shape takes the place of the oldest (gpus(2))
  CHECK(run(gpus(2), mix) == 4);

  // Another mix: nothing remembered counts.
  const auto other = std::make_shared<const RequestMix>(RequestMix::defaults());
  CHECK(run(gpus(2), other) == 4);
  CHECK(run(gpus(2), other) == 0);

  // A removed node's ordinal given to a new node (with the same change count): scored afresh.
  memo.forget(1);
  states[1] = makeNode("n9", 1);
  CHECK(run(gpus(2), other) == 1);
}

TEST_CASE("score memo: a narrowing Scheduler that remembers scores chooses as one that does not",
          "[scheduler][score-memo][narrow]") {
  SchedulerConfig with;
  with.narrow_to_best = true;
  SchedulerConfig without = with;
  without.remember_scores = false;
  Scheduler remembering(with), fresh(without);
  const std::vector<std::string> products = {"NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB", "NVIDIA-L40S"};
  std::vector<std::string> names;
  auto addNode = [&](const std::string& name, size_t kind) {
    const auto facts = gpuNode(name, kind == 2 ? 4 : 8, products[kind]);
    REQUIRE(remembering.upsertNode(facts).isOk());
    REQUIRE(fresh.upsertNode(facts).isOk());
  };
  for (int i = 0; i < 24; ++i) {
    names.push_back("node-" + std::to_string(i));
    addNode(names.back(), static_cast<size_t>(i % 3));
  }
  uint64_t state = 42;
  auto next = [&](uint64_t n) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (state >> 33) % n;
  };
  std::map<std::string, std::string> running;  // uid -> node
  int placed = 0, compared = 0;
  // Enough filter calls for the request mix window to refresh (every 500 requests).
  for (int step = 0; step < 1500; ++step) {
    INFO("step " << step);
    const uint64_t what = next(20);
    if (what < 3 && !running.empty()) {  // a pod ends
      auto it = running.begin();
      std::advance(it, static_cast<long>(next(running.size())));
      REQUIRE(remembering.release(it->first) == fresh.release(it->first));
      running.erase(it);
      continue;
    }
    if (what == 3) {  // a node leaves and comes back (its ordinal may go to another node)
      const std::string name = names[next(names.size())];
      for (auto it = running.begin(); it != running.end();) {
        it = it->second == name ? running.erase(it) : std::next(it);
      }
      REQUIRE(remembering.removeNode(name) == fresh.removeNode(name));
      addNode(name, next(3));
      continue;
    }
    const int want[] = {1, 1, 2, 4, 8};
    troupe::sched::StringMap annotations;
    if (next(4) == 0) annotations["troupe.dev/gpu-topology"] = "nvlink";
    if (next(5) == 0) annotations["troupe.dev/gpu-model"] = products[next(2)];
    const PodFacts pod = gpuPod("p" + std::to_string(step), want[next(5)], annotations);
    const FilterResult a = remembering.filter(pod, names);
    const FilterResult b = fresh.filter(pod, names);
    REQUIRE(a.passed == b.passed);
    ++compared;
    if (a.passed.empty()) {
      remembering.forgetPod(pod.uid);
      fresh.forgetPod(pod.uid);
      continue;
    }
    auto ra = remembering.reserve(pod.uid, pod.ns, pod.name, a.passed[0]);
    auto rb = fresh.reserve(pod.uid, pod.ns, pod.name, b.passed[0]);
    REQUIRE(ra.isOk() == rb.isOk());
    if (ra.isOk()) {
      CHECK(ra.value().gpus == rb.value().gpus);
      running[pod.uid] = a.passed[0];
      ++placed;
    }
  }
  CHECK(compared > 1000);
  CHECK(placed > 100);
}
