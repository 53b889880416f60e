// The scheduling core: filter, prioritize, reserve, release, preempt, and concurrent use.
#include "troupe/sched/scheduler/scheduler.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <catch2/catch.hpp>
#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "adapters/http/extender_scores.h"
#include "support/fixtures.h"
#include "troupe/sched/policies/policy_registry.h"

namespace {

using troupe::Code;
using troupe::http::HostScore;
using troupe::model::Allocation;
using troupe::sched::FilterResult;
using troupe::sched::PodFacts;
using troupe::sched::Scheduler;
using troupe::sched::SchedulerConfig;
using troupe::testing::gpuNode;
using troupe::testing::gpuPod;

Scheduler makeScheduler(std::string_view kind = "troupe") {
  SchedulerConfig config;
  config.policy = troupe::sched::builtinPolicies().create(kind).value();
  return Scheduler(config);
}

void addNode(Scheduler& s, const troupe::model::NodeFacts& f) {
  auto st = s.upsertNode(f);
  INFO(st.message());
  REQUIRE(st.isOk());
}

troupe::model::NodeFacts nodeWithProfile(const std::string& name, const std::string& profile,
                                         const std::string& product = "NVIDIA-L40S") {
  auto f = gpuNode(name, 8, product, 46068);
  f.labels["troupe.dev/topology-profile"] = profile;
  return f;
}

void hold(Scheduler& s, const std::string& node, const std::string& uid, std::vector<int> gpus,
          int unknown = 0) {
  Allocation a;
  a.pod_uid = uid;
  a.pod_key = "ns/" + uid;
  a.node = node;
  a.gpus = std::move(gpus);
  a.unknown_gpus = unknown;
  auto st = s.recordAllocation(a);
  INFO(st.message());
  REQUIRE(st.isOk());
}

int scoreOf(const std::vector<HostScore>& scores, const std::string& host) {
  for (const HostScore& h : scores)
    if (h.host == host) return static_cast<int>(h.score);
  FAIL("no score for " << host);
  return -1;
}

void checkScoreShape(const std::vector<HostScore>& scores, const std::vector<std::string>& names) {
  REQUIRE(scores.size() == names.size());
  int tens = 0;
  for (size_t i = 0; i < scores.size(); ++i) {
    CHECK(scores[i].host == names[i]);  // request order
    CHECK(scores[i].score >= 0);
    CHECK(scores[i].score <= 10);
    tens += scores[i].score == 10;
  }
  CHECK(tens == 1);
}

// Filter, then reserve on `node`; returns the GPUs.
std::vector<int> filterAndReserve(Scheduler& s, const PodFacts& pod, const std::string& node) {
  FilterResult f = s.filter(pod, {node});
  INFO("filter: " << (f.failed.contains(node) ? f.failed.at(node) : "")
                  << (f.unresolvable.contains(node) ? f.unresolvable.at(node) : ""));
  REQUIRE(f.passed == std::vector<std::string>{node});
  auto r = s.reserve(pod.uid, pod.ns, pod.name, node);
  INFO(r.status().message());
  REQUIRE(r.isOk());
  return r.value().gpus;
}

}  // namespace

TEST_CASE("scheduler: filter sorts nodes into passed, failed and unresolvable", "[scheduler]") {
  Scheduler s = makeScheduler();
  addNode(s, gpuNode("fits", 8));
  addNode(s, gpuNode("fits2", 8));
  addNode(s, gpuNode("busy", 8));
  addNode(s, gpuNode("never", 2));
  hold(s, "busy", "holder", {0, 1, 2, 3, 4, 5});

  FilterResult r = s.filter(gpuPod("p", 4), {"never", "fits", "busy", "fits2"});
  CHECK(r.passed == std::vector<std::string>{"fits", "fits2"});
  REQUIRE(r.failed.size() == 1);
  CHECK_THAT(r.failed.at("busy"), Catch::Contains("free GPUs") && Catch::StartsWith("troupe:"));
  REQUIRE(r.unresolvable.size() == 1);
  CHECK_THAT(r.unresolvable.at("never"), Catch::Contains("fewer GPUs"));
  CHECK(r.categories == std::map<std::string, int>{{"busy", 1}, {"count", 1}});

  SECTION("a pod without GPUs passes every known node") {
    addNode(s, [] {
      troupe::model::NodeFacts f;
      f.name = "cpu-only";
      return f;
    }());
    FilterResult c = s.filter(gpuPod("cpu", 0), {"fits", "busy", "never", "cpu-only"});
    CHECK(c.passed.size() == 4);
    CHECK(c.failed.empty());
    CHECK(c.unresolvable.empty());
  }
  SECTION("a GPU pod never passes a node without GPUs") {
    troupe::model::NodeFacts f;
    f.name = "cpu-only";
    addNode(s, f);
    FilterResult c = s.filter(gpuPod("g", 1), {"cpu-only"});
    CHECK(c.unresolvable.contains("cpu-only"));
    CHECK(c.categories.at("no-gpus") == 1);
  }
}

TEST_CASE("scheduler: a batch filter words every rejection as filtering that node alone does",
          "[scheduler]") {
  // Filter words each distinct misfit once per call (the model misfit once per product) and
  // hands the words to every node it fits: each node must still read its own reason.
  Scheduler s = makeScheduler();
  addNode(s, gpuNode("h100-free", 8));
  addNode(s, gpuNode("h100-half", 8));
  addNode(s, gpuNode("h100-full", 8));
  addNode(s, gpuNode("a100", 8, "NVIDIA-A100-SXM4-80GB", 81920));
  addNode(s, gpuNode("a100-40", 8, "NVIDIA-A100-SXM4-40GB", 40960));
  addNode(s, gpuNode("l40s", 8, "NVIDIA-L40S", 46068));
  addNode(s, gpuNode("quad", 4));
  troupe::model::NodeFacts unlabelled;
  unlabelled.name = "unlabelled";
  unlabelled.allocatable_gpus = "8";
  addNode(s, unlabelled);
  troupe::model::NodeFacts cpu_only;
  cpu_only.name = "cpu-only";
  addNode(s, cpu_only);
  troupe::model::NodeFacts one_pod = gpuNode("one-pod", 8);
  one_pod.pods = "1";
  addNode(s, one_pod);
  hold(s, "h100-half", "half", {0, 2, 4, 6});
  hold(s, "h100-full", "full", {0, 1, 2, 3, 4, 5, 6, 7});
  hold(s, "a100", "a100-two", {0, 5});
  hold(s, "one-pod", "only", {0});
  const std::vector<std::string> nodes = {"h100-free", "h100-half", "h100-full", "a100",
                                          "a100-40",   "l40s",      "quad",      "unlabelled",
                                          "cpu-only",  "one-pod",   "ghost"};
  const std::vector<troupe::sched::StringMap> variants = {
      {},
      {{"troupe.dev/gpu-topology", "nvlink"}},
      {{"troupe.dev/gpu-model", "NVIDIA-H100-80GB-HBM3"}},
      {{"troupe.dev/gpu-model", "NVIDIA-A100-SXM4-80GB,NVIDIA-A100-SXM4-40GB"}},
      {{"troupe.dev/gpu-memory", "60Gi"}},
      {{"troupe.dev/gpu-milli", "500"}},
  };
  int pods = 0;
  for (int gpus : {1, 4, 8}) {
    for (const auto& annotations : variants) {
      if (annotations.count("troupe.dev/gpu-milli") && gpus != 1) continue;
      const PodFacts pod = gpuPod("p" + std::to_string(pods++), gpus, annotations);
      const FilterResult all = s.filter(pod, nodes);
      std::map<std::string, int> categories;
      for (const std::string& n : nodes) {
        INFO("pod " << pod.name << " (" << gpus << " GPUs) on " << n);
        const FilterResult one = s.filter(pod, {n});
        for (const auto& [category, count] : one.categories) categories[category] += count;
        const bool passed = std::find(all.passed.begin(), all.passed.end(), n) != all.passed.end();
        CHECK(passed == (one.passed == std::vector<std::string>{n}));
        CHECK(all.failed.contains(n) == one.failed.contains(n));
        CHECK(all.unresolvable.contains(n) == one.unresolvable.contains(n));
        if (one.failed.contains(n) && all.failed.contains(n)) CHECK(all.failed.at(n) == one.failed.at(n));
        if (one.unresolvable.contains(n) && all.unresolvable.contains(n))
          CHECK(all.unresolvable.at(n) == one.unresolvable.at(n));
      }
      CHECK(all.categories == categories);
      CHECK(all.passed.size() + all.failed.size() + all.unresolvable.size() == nodes.size());
    }
  }
}

TEST_CASE("scheduler: a 16-GPU pod is unresolvable on 8-GPU nodes", "[scheduler]") {
  Scheduler s = makeScheduler();
  const std::vector<std::string> names = {"a", "b", "c"};
  for (const auto& n : names) addNode(s, gpuNode(n, 8));
  FilterResult r = s.filter(gpuPod("huge", 16), names);
  CHECK(r.passed.empty());
  CHECK(r.failed.empty());
  REQUIRE(r.unresolvable.size() == 3);
  for (const auto& n : names) {
    REQUIRE(r.unresolvable.contains(n));
    CHECK_THAT(r.unresolvable.at(n), Catch::Contains("16"));
  }
  CHECK(r.categories.at("count") == 3);
}

TEST_CASE("scheduler: a bad annotation makes every node unresolvable, naming it", "[scheduler]") {
  Scheduler s = makeScheduler();
  addNode(s, gpuNode("a", 8));
  addNode(s, gpuNode("b", 8));
  const std::vector<std::string> names = {"a", "b", "ghost"};
  FilterResult r = s.filter(gpuPod("bad", 2, {{"troupe.dev/gpu-topology", "fast"}}), names);
  CHECK(r.passed.empty());
  CHECK(r.failed.empty());
  REQUIRE(r.unresolvable.size() == 3);
  for (const auto& n : names) {
    CHECK_THAT(r.unresolvable.at(n), Catch::Contains("troupe.dev/gpu-topology") && Catch::Contains("fast"));
  }
  CHECK(r.categories.at("invalid-pod") == 3);
  // An invalid pod is not remembered: it cannot be bound.
  auto res = s.reserve("uid-bad", "default", "bad", "a");
  CHECK(res.status().code() == Code::kFailedPrecondition);
}

TEST_CASE("scheduler: unknown node names are unresolvable", "[scheduler]") {
  Scheduler s = makeScheduler();
  addNode(s, gpuNode("known", 8));
  FilterResult r = s.filter(gpuPod("p", 1), {"ghost-1", "known", "ghost-2"});
  CHECK(r.passed == std::vector<std::string>{"known"});
  REQUIRE(r.unresolvable.size() == 2);
  CHECK_THAT(r.unresolvable.at("ghost-1"), Catch::Contains("unknown"));
  CHECK(r.unresolvable.at("ghost-1") == r.unresolvable.at("ghost-2"));  // groups in kube events
  CHECK(r.categories.at("unknown-node") == 2);
}

TEST_CASE("scheduler: model and memory requirements", "[scheduler]") {
  Scheduler s = makeScheduler();
  addNode(s, gpuNode("h100", 8));
  addNode(s, gpuNode("a100-40", 8, "NVIDIA-A100-SXM4-40GB", 40960));
  FilterResult m =
      s.filter(gpuPod("m", 1, {{"troupe.dev/gpu-model", "nvidia-a100-sxm4-40gb"}}), {"h100", "a100-40"});
  CHECK(m.passed == std::vector<std::string>{"a100-40"});
  CHECK_THAT(m.unresolvable.at("h100"), Catch::Contains("NVIDIA-H100-80GB-HBM3"));
  CHECK(m.categories.at("model") == 1);

  FilterResult g = s.filter(gpuPod("g", 1, {{"troupe.dev/gpu-memory", "60Gi"}}), {"h100", "a100-40"});
  CHECK(g.passed == std::vector<std::string>{"h100"});
  CHECK_THAT(g.unresolvable.at("a100-40"), Catch::Contains("troupe.dev/gpu-memory"));
  CHECK(g.categories.at("memory") == 1);
}

TEST_CASE("scheduler: nvlink pods need a big enough NVLink domain", "[scheduler]") {
  Scheduler s = makeScheduler();
  addNode(s, gpuNode("h100", 8));
  addNode(s, gpuNode("v100", 8, "Tesla-V100-SXM2-16GB", 16384));
  addNode(s, gpuNode("pcie", 8, "NVIDIA-L40S", 46068));
  addNode(s, nodeWithProfile("bridged", "pcie-nvbridge-8"));
  const std::vector<std::string> names = {"h100", "v100", "pcie", "bridged"};

  FilterResult eight = s.filter(gpuPod("e", 8, {{"troupe.dev/gpu-topology", "nvlink"}}), names);
  CHECK(eight.passed == std::vector<std::string>{"h100", "v100"});
  CHECK(eight.unresolvable.contains("pcie"));
  CHECK(eight.unresolvable.contains("bridged"));
  CHECK_THAT(eight.unresolvable.at("pcie"), Catch::Contains("NVLink"));
  CHECK(eight.categories.at("topology") == 2);

  // Without the annotation the same pod fits everywhere.
  FilterResult plain = s.filter(gpuPod("p", 8), names);
  CHECK(plain.passed == names);

  FilterResult two = s.filter(gpuPod("t", 2, {{"troupe.dev/gpu-topology", "nvlink"}}), names);
  CHECK(two.passed == std::vector<std::string>{"h100", "v100", "bridged"});

  // Bridged pairs all broken up: busy, not never.
  hold(s, "bridged", "x", {0, 2, 4, 6});
  FilterResult split = s.filter(gpuPod("t2", 2, {{"troupe.dev/gpu-topology", "nvlink"}}), {"bridged"});
  CHECK(split.passed.empty());
  REQUIRE(split.failed.contains("bridged"));
  CHECK_THAT(split.failed.at("bridged"), Catch::Contains("NVLink"));
  // A 2-GPU nvlink pod on the bridged node gets a bridged pair.
  REQUIRE(s.release("x"));
  auto gpus = filterAndReserve(s, gpuPod("t3", 2, {{"troupe.dev/gpu-topology", "nvlink"}}), "bridged");
  REQUIRE(gpus.size() == 2);
  CHECK(gpus[0] / 2 == gpus[1] / 2);
}

TEST_CASE("scheduler: prioritize gives one node 10 and packs by default", "[scheduler]") {
  Scheduler s = makeScheduler();
  addNode(s, gpuNode("empty", 8));
  addNode(s, gpuNode("half", 8));
  addNode(s, gpuNode("almost-full", 8));
  hold(s, "half", "h", {0, 1, 2, 3});
  hold(s, "almost-full", "f", {0, 1, 2, 3, 4, 5, 6});
  const std::vector<std::string> names = {"empty", "half", "almost-full", "ghost"};
  auto scores = troupe::http::extenderScores(s.prioritize(gpuPod("p", 2), names));
  checkScoreShape(scores, names);
  CHECK(scoreOf(scores, "half") == 10);
  CHECK(scoreOf(scores, "empty") < 10);
  CHECK(scoreOf(scores, "almost-full") == 0);  // does not fit
  CHECK(scoreOf(scores, "ghost") == 0);        // unknown

  SECTION("spread prefers the empty node") {
    Scheduler sp = makeScheduler("spread");
    addNode(sp, gpuNode("empty", 8));
    addNode(sp, gpuNode("half", 8));
    hold(sp, "half", "h", {0, 1, 2, 3});
    auto sc = troupe::http::extenderScores(sp.prioritize(gpuPod("p", 2), {"empty", "half"}));
    checkScoreShape(sc, {"empty", "half"});
    CHECK(scoreOf(sc, "empty") == 10);
    CHECK(scoreOf(sc, "half") == 0);
  }
  SECTION("binpack prefers the fuller node") {
    Scheduler bp = makeScheduler("binpack");
    addNode(bp, gpuNode("empty", 8));
    addNode(bp, gpuNode("half", 8));
    hold(bp, "half", "h", {0, 1, 2, 3});
    auto sc = troupe::http::extenderScores(bp.prioritize(gpuPod("p", 2), {"empty", "half"}));
    CHECK(scoreOf(sc, "half") == 10);
    CHECK(scoreOf(sc, "empty") == 0);
  }
}

TEST_CASE("scheduler: prioritize prefers better-connected GPUs when packing is equal", "[scheduler]") {
  Scheduler s = makeScheduler();
  addNode(s, gpuNode("nv1-pair", 8, "Tesla-V100-SXM2-16GB", 16384));
  addNode(s, gpuNode("nv2-pair", 8, "Tesla-V100-SXM2-16GB", 16384));
  hold(s, "nv1-pair", "a", {2, 3, 4, 5, 6, 7});  // leaves 0-1: one NVLink
  hold(s, "nv2-pair", "b", {1, 2, 4, 5, 6, 7});  // leaves 0-3: two NVLinks
  const std::vector<std::string> names = {"nv1-pair", "nv2-pair"};
  auto scores = troupe::http::extenderScores(s.prioritize(gpuPod("p", 2), names));
  checkScoreShape(scores, names);
  CHECK(scoreOf(scores, "nv2-pair") == 10);
  CHECK(scoreOf(scores, "nv1-pair") < 10);
}

TEST_CASE("scheduler: ties go to one node, stably", "[scheduler]") {
  Scheduler s = makeScheduler();
  std::vector<std::string> names;
  for (int i = 0; i < 6; ++i) {
    names.push_back("twin-" + std::to_string(i));
    addNode(s, gpuNode(names.back(), 8));
  }
  auto first = troupe::http::extenderScores(s.prioritize(gpuPod("p", 1), names));
  checkScoreShape(first, names);
  for (const HostScore& h : first) CHECK((h.score == 10 || h.score == 9));
  std::vector<std::string> reversed(names.rbegin(), names.rend());
  auto again = troupe::http::extenderScores(s.prioritize(gpuPod("q", 1), reversed));
  checkScoreShape(again, reversed);
  auto winner = [](const std::vector<HostScore>& v) {
    return std::find_if(v.begin(), v.end(), [](const HostScore& h) { return h.score == 10; })->host;
  };
  CHECK(winner(first) == winner(again));  // independent of request order

  auto invalid =
      troupe::http::extenderScores(s.prioritize(gpuPod("bad", 1, {{"troupe.dev/gpu-milli", "abc"}}), names));
  REQUIRE(invalid.size() == names.size());
  for (const HostScore& h : invalid) CHECK(h.score == 0);
  CHECK(troupe::http::extenderScores(s.prioritize(gpuPod("none", 1), {})).empty());
}

TEST_CASE("scheduler: reserve records GPUs, is idempotent and never overlaps", "[scheduler]") {
  Scheduler s = makeScheduler();
  addNode(s, gpuNode("n1", 8));
  addNode(s, gpuNode("n2", 8));
  const PodFacts p1 = gpuPod("p1", 4);
  auto g1 = filterAndReserve(s, p1, "n1");
  CHECK(g1.size() == 4);
  auto held = s.allocationOf("uid-p1");
  REQUIRE(held);
  CHECK(held->node == "n1");
  CHECK(held->gpus == g1);
  CHECK(held->pod_key == "default/p1");

  // A retried bind returns the same GPUs and records nothing new.
  auto retry = s.reserve("uid-p1", "default", "p1", "n1");
  REQUIRE(retry.isOk());
  CHECK(retry.value().gpus == g1);

  auto g2 = filterAndReserve(s, gpuPod("p2", 4), "n1");
  CHECK(g2.size() == 4);
  std::set<int> all(g1.begin(), g1.end());
  all.insert(g2.begin(), g2.end());
  CHECK(all.size() == 8);

  SECTION("a pod that no longer fits is refused") {
    const PodFacts p3 = gpuPod("p3", 1);
    CHECK(s.filter(p3, {"n1", "n2"}).passed == std::vector<std::string>{"n2"});
    filterAndReserve(s, gpuPod("p6", 8), "n2");  // n2 fills up between p3's filter and its bind
    auto r = s.reserve("uid-p3", "default", "p3", "n2");
    REQUIRE_FALSE(r.isOk());
    CHECK(r.status().code() == Code::kFailedPrecondition);
    CHECK_THAT(r.status().message(), Catch::Contains("no longer fits") && Catch::Contains("default/p3"));
  }
  SECTION("an unfiltered pod is refused") {
    auto r = s.reserve("uid-stranger", "default", "stranger", "n2");
    REQUIRE_FALSE(r.isOk());
    CHECK(r.status().code() == Code::kFailedPrecondition);
    CHECK_THAT(r.status().message(), Catch::Contains("filter") && Catch::Contains("uid-stranger"));
  }
  SECTION("a pod already placed elsewhere is refused") {
    auto r = s.reserve("uid-p1", "default", "p1", "n2");
    REQUIRE_FALSE(r.isOk());
    CHECK(r.status().code() == Code::kFailedPrecondition);
    CHECK_THAT(r.status().message(), Catch::Contains("n1"));
  }
  SECTION("an unknown node is NotFound") {
    const PodFacts p4 = gpuPod("p4", 1);
    s.filter(p4, {"n2"});
    auto r = s.reserve("uid-p4", "default", "p4", "ghost");
    REQUIRE_FALSE(r.isOk());
    CHECK(r.status().code() == Code::kNotFound);
  }
  SECTION("release frees the GPUs for the next pod") {
    CHECK(s.release("uid-p1"));
    CHECK_FALSE(s.release("uid-p1"));
    CHECK_FALSE(s.allocationOf("uid-p1").has_value());
    auto g5 = filterAndReserve(s, gpuPod("p5", 4), "n1");
    CHECK(std::set<int>(g5.begin(), g5.end()) == std::set<int>(g1.begin(), g1.end()));
  }
}

TEST_CASE("scheduler: DGX-1 reservations follow go-gpuallocator", "[scheduler][parity]") {
  Scheduler s = makeScheduler();
  addNode(s, gpuNode("dgx1", 8, "Tesla-V100-SXM2-32GB", 32768));
  std::vector<std::vector<int>> got;
  for (int i = 0; i < 4; ++i)
    got.push_back(filterAndReserve(s, gpuPod("pair" + std::to_string(i), 2), "dgx1"));
  CHECK(got == std::vector<std::vector<int>>{{0, 3}, {1, 2}, {4, 7}, {5, 6}});
}

TEST_CASE("scheduler: shared pods pack onto one GPU", "[scheduler]") {
  Scheduler s = makeScheduler();
  addNode(s, gpuNode("n", 8));
  auto a = filterAndReserve(s, gpuPod("a", 0, {{"troupe.dev/gpu-milli", "500"}}), "n");
  auto b = filterAndReserve(s, gpuPod("b", 0, {{"troupe.dev/gpu-milli", "300"}}), "n");
  auto c = filterAndReserve(s, gpuPod("c", 0, {{"troupe.dev/gpu-milli", "300"}}), "n");
  REQUIRE(a.size() == 1);
  CHECK(b == a);  // 500 free on a's GPU
  CHECK(c != a);  // only 200 left there
  CHECK(s.allocationOf("uid-b")->milli_per_gpu == 300);
  auto sum = s.summary();
  REQUIRE(sum.by_product.size() == 1);
  CHECK(sum.by_product[0].used_milli == 1100);
  CHECK(sum.by_product[0].shared_gpus == 2);
  CHECK(sum.by_product[0].whole_free == 6);
}

TEST_CASE("scheduler: preempt keeps a node only if evicting its victims makes the pod fit", "[scheduler]") {
  Scheduler s = makeScheduler();
  addNode(s, gpuNode("a1", 8));
  addNode(s, gpuNode("a2", 8));
  hold(s, "a1", "v1", {0, 1, 2, 3});
  hold(s, "a1", "k1", {4, 5, 6, 7});
  hold(s, "a2", "v2", {0, 1});
  hold(s, "a2", "v3", {2, 3});
  hold(s, "a2", "k2", {4, 5, 6, 7});
  const PodFacts pod = gpuPod("preemptor", 4);
  CHECK(s.filter(pod, {"a1", "a2"}).failed.size() == 2);

  auto out = s.preempt(pod, {{"a1", {"v1"}}, {"a2", {"v2"}}, {"ghost", {"x"}}});
  CHECK(out == std::map<std::string, std::vector<std::string>>{{"a1", {"v1"}}});

  out = s.preempt(pod, {{"a2", {"v3", "v2"}}, {"a1", {}}});
  CHECK(out == std::map<std::string, std::vector<std::string>>{{"a2", {"v3", "v2"}}});

  // An 8-GPU pod fits nowhere while k1/k2 stay.
  CHECK(s.preempt(gpuPod("big", 8), {{"a1", {"v1"}}, {"a2", {"v2", "v3"}}}).empty());
  CHECK(s.preempt(gpuPod("big", 8), {{"a1", {"v1", "k1"}}}).size() == 1);
  // A model the node lacks: no eviction helps.
  CHECK(s.preempt(gpuPod("m", 4, {{"troupe.dev/gpu-model", "NVIDIA-B200"}}), {{"a1", {"v1"}}}).empty());
  // An invalid pod vetoes everything.
  CHECK(s.preempt(gpuPod("bad", 4, {{"troupe.dev/gpu-memory", "lots"}}), {{"a1", {"v1"}}}).empty());
  // Preempt only simulates: the victims still hold their GPUs.
  REQUIRE(s.allocationOf("v1").has_value());
  CHECK(s.allocationOf("v1")->gpus == std::vector<int>{0, 1, 2, 3});
  CHECK(s.filter(pod, {"a1"}).passed.empty());
}

TEST_CASE("scheduler: recordAllocation and unknown GPUs", "[scheduler]") {
  Scheduler s = makeScheduler();
  addNode(s, gpuNode("n", 8));
  hold(s, "n", "ghost", {}, 6);
  FilterResult four = s.filter(gpuPod("four", 4), {"n"});
  CHECK(four.failed.contains("n"));
  FilterResult two = s.filter(gpuPod("two", 2), {"n"});
  CHECK(two.passed == std::vector<std::string>{"n"});
  CHECK(s.summary().by_product.at(0).whole_free == 2);
  REQUIRE(s.reserve("uid-two", "default", "two", "n").isOk());
  CHECK(s.filter(gpuPod("one", 1), {"n"}).failed.contains("n"));
  CHECK(s.release("ghost"));
  CHECK(s.filter(gpuPod("one", 1), {"n"}).passed.size() == 1);

  SECTION("errors") {
    Allocation a;
    a.pod_uid = "x";
    a.node = "nowhere";
    a.gpus = {0};
    CHECK(s.recordAllocation(a).code() == Code::kNotFound);
    a.node = "n";
    a.gpus = {s.allocationOf("uid-two")->gpus[0]};
    CHECK(s.recordAllocation(a).code() == Code::kFailedPrecondition);  // overlap
    a.gpus = {};
    a.pod_uid = "uid-two";
    CHECK(s.recordAllocation(a).code() == Code::kFailedPrecondition);  // already held
  }
}

TEST_CASE("scheduler: node updates keep allocations; removal forgets them", "[scheduler]") {
  Scheduler s = makeScheduler();
  addNode(s, gpuNode("n", 8));
  CHECK(s.nodeCount() == 1);
  hold(s, "n", "p", {0, 1, 2, 3, 4, 5});
  addNode(s, gpuNode("n", 8));  // a relabel, say
  CHECK(s.nodeCount() == 1);
  CHECK(s.filter(gpuPod("q", 4), {"n"}).failed.contains("n"));
  CHECK(s.upsertNode(gpuNode("", 8)).code() == Code::kInvalidArgument);
  CHECK(s.removeNode("n"));
  CHECK_FALSE(s.removeNode("n"));
  CHECK(s.nodeCount() == 0);
  CHECK_FALSE(s.allocationOf("p").has_value());
  CHECK_FALSE(s.release("p"));
}

TEST_CASE("scheduler: filterNodes learns nodes and names broken facts", "[scheduler]") {
  Scheduler s = makeScheduler();
  auto bad = gpuNode("broken", 8);
  bad.labels["troupe.dev/topology-profile"] = "warp-drive";
  std::vector<std::string> errors;
  FilterResult r = s.filterNodes(gpuPod("p", 4), {gpuNode("good", 8), bad}, &errors);
  CHECK(r.passed == std::vector<std::string>{"good"});
  REQUIRE(r.unresolvable.contains("broken"));
  CHECK_THAT(r.unresolvable.at("broken"), Catch::Contains("warp-drive"));
  REQUIRE(errors.size() == 1);
  CHECK(s.nodeCount() == 1);
}

TEST_CASE("scheduler: re-learning unchanged facts keeps the node; any changed fact applies", "[scheduler]") {
  // upsertNode skips nodes whose facts it has already built (full-node mode sends every
  // candidate with every request); each kind of change must still reach the model.
  Scheduler s = makeScheduler();
  REQUIRE(s.upsertNode(gpuNode("n", 8)).isOk());
  REQUIRE(s.filter(gpuPod("p", 4), {"n"}).passed.size() == 1);
  REQUIRE(s.reserve("uid-p", "default", "p", "n").isOk());
  for (int i = 0; i < 3; ++i) REQUIRE(s.upsertNode(gpuNode("n", 8)).isOk());
  REQUIRE(s.allocationOf("uid-p").has_value());
  auto fits = [&](const std::string& pod, int gpus) {
    return s.filter(gpuPod(pod, gpus), {"n"}).passed.size() == 1;
  };
  CHECK(fits("a", 4));  // 4 of 8 still held
  CHECK_FALSE(fits("b", 5));

  auto fewer = gpuNode("n", 8);
  fewer.allocatable_gpus = "4";  // a changed quantity applies: the pod's 4 GPUs fill the node
  REQUIRE(s.upsertNode(fewer).isOk());
  CHECK_FALSE(fits("c", 1));
  auto bad_label = gpuNode("n", 8);
  bad_label.labels["troupe.dev/topology-profile"] = "warp-drive";  // a changed label is rebuilt
  CHECK_THAT(s.upsertNode(bad_label).message(), Catch::Contains("warp-drive"));
  auto bad_annotation = gpuNode("n", 8);
  bad_annotation.annotations["troupe.dev/gpu-topology"] = R"([["X"]])";  // so is an annotation
  CHECK_THAT(s.upsertNode(bad_annotation).message(), Catch::Contains("gpu-topology"));
  CHECK_FALSE(fits("d", 1));  // the failed updates left the 4-GPU node in place
  REQUIRE(s.upsertNode(gpuNode("n", 8)).isOk());
  CHECK(fits("e", 4));
  CHECK_FALSE(fits("f", 5));
  REQUIRE(s.allocationOf("uid-p").has_value());
}

TEST_CASE("scheduler: concurrent filter/prioritize/reserve/release never double-allocates",
          "[scheduler][concurrency]") {
  // Narrowing too: its ScoreMemo is written by concurrent filters under the shared lock.
  SchedulerConfig config;
  config.narrow_to_best = GENERATE(false, true);
  Scheduler s(config);
  const std::vector<std::string> names = {"h1", "h2", "v100", "bridged"};
  addNode(s, gpuNode("h1", 8));
  addNode(s, gpuNode("h2", 8));
  addNode(s, gpuNode("v100", 8, "Tesla-V100-SXM2-16GB", 16384));
  addNode(s, nodeWithProfile("bridged", "pcie-nvbridge-8"));

  // The test's own ledger of what reservations handed out. An entry is added after reserve()
  // succeeds and removed before release(), so two entries that overlap were held at once.
  std::mutex ledger_mu;
  std::map<std::string, std::array<int64_t, 8>> ledger;
  for (const auto& n : names) ledger[n].fill(0);
  std::atomic<int> violations{0}, reserved{0}, refused{0}, release_failures{0};

  constexpr int kThreads = 8;
  constexpr int kIterations = 300;
  auto worker = [&](int t) {
    std::deque<Allocation> mine;
    auto drop = [&] {
      Allocation a = mine.front();
      mine.pop_front();
      {
        std::lock_guard<std::mutex> lock(ledger_mu);
        for (int g : a.gpus) ledger[a.node][static_cast<size_t>(g)] -= a.milli_per_gpu;
      }
      if (!s.release(a.pod_uid)) ++release_failures;
    };
    for (int i = 0; i < kIterations; ++i) {
      const std::string name = "t" + std::to_string(t) + "-" + std::to_string(i);
      PodFacts pod;
      switch ((i + t) % 5) {
        case 0: pod = gpuPod(name, 1); break;
        case 1: pod = gpuPod(name, 2); break;
        case 2: pod = gpuPod(name, 4); break;
        case 3: pod = gpuPod(name, 2, {{"troupe.dev/gpu-topology", "nvlink"}}); break;
        default: pod = gpuPod(name, 0, {{"troupe.dev/gpu-milli", "400"}}); break;
      }
      FilterResult f = s.filter(pod, names);
      if (f.passed.empty()) {
        if (!mine.empty()) drop();
        continue;
      }
      std::vector<HostScore> scores = troupe::http::extenderScores(s.prioritize(pod, f.passed));
      std::string target = f.passed.front();
      for (const HostScore& h : scores)
        if (h.score == 10) target = h.host;
      auto r = s.reserve(pod.uid, pod.ns, pod.name, target);
      if (!r.isOk()) {
        ++refused;  // another thread got there first: legitimate
        if (!mine.empty()) drop();
        continue;
      }
      ++reserved;
      {
        std::lock_guard<std::mutex> lock(ledger_mu);
        for (int g : r.value().gpus) {
          int64_t& used = ledger[target][static_cast<size_t>(g)];
          used += r.value().milli_per_gpu;
          if (used > 1000) ++violations;
        }
      }
      mine.push_back(r.value());
      if (mine.size() > 3 || i % 7 == 0) drop();
    }
    // Final check of this thread's holdings against the scheduler's own record.
    for (const Allocation& a : mine) {
      auto held = s.allocationOf(a.pod_uid);
      if (!held || held->gpus != a.gpus || held->node != a.node) ++violations;
    }
  };
  std::atomic<bool> stop{false};
  std::thread observer([&] {
    while (!stop) {
      (void)s.summary();
      (void)s.upsertNode(gpuNode("h2", 8));  // same facts: allocations must survive
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t);
  for (auto& th : threads) th.join();
  stop = true;
  observer.join();

  CHECK(violations == 0);
  CHECK(release_failures == 0);
  CHECK(reserved > kThreads * kIterations / 4);  // the run did real work
  INFO("reserved " << reserved << ", refused " << refused);

  // The scheduler's state equals the ledger: per GPU, used milli <= capacity and matches.
  const auto summary = s.summary();
  int64_t ledger_total = 0;
  for (const auto& [node, gpus] : ledger) {
    for (int64_t u : gpus) {
      CHECK(u >= 0);
      CHECK(u <= 1000);
      ledger_total += u;
    }
  }
  int64_t used_total = 0;
  for (const auto& row : summary.by_product) used_total += row.used_milli;
  CHECK(used_total == ledger_total);
}

TEST_CASE("scheduler: a later verb reuses the filter's request only while the pod is unchanged",
          "[scheduler][pending]") {
  Scheduler s{SchedulerConfig{}};
  REQUIRE(s.upsertNode(gpuNode("a", 8)).isOk());
  REQUIRE(s.upsertNode(gpuNode("small", 2)).isOk());
  PodFacts p = gpuPod("p", 4);
  REQUIRE(s.filter(p, {"a", "small"}).passed == std::vector<std::string>{"a"});
  std::vector<troupe::sched::HostValue> same = s.prioritize(p, {"a", "small"});
  REQUIRE(same.size() == 2);
  CHECK(same[0].value >= 0);
  CHECK(same[1].value < 0);  // does not fit

  // Changed since its filter (now asks for an unknown model): parsed again, and fits nowhere.
  p.annotations["troupe.dev/gpu-model"] = "NVIDIA-B200";
  for (const troupe::sched::HostValue& h : s.prioritize(p, {"a", "small"})) CHECK(h.value < 0);
  FilterResult refiltered = s.filter(p, {"a", "small"});
  CHECK(refiltered.passed.empty());
  // The bind uses the request of the latest filter: the node no longer passed it.
  CHECK_FALSE(s.reserve(p.uid, p.ns, p.name, "a").isOk());
}

namespace {

// A pod asking `gpus` whole GPUs and `cpu` of CPU, bound to `node` when one is given.
PodFacts podAsking(const std::string& name, int gpus, const std::string& cpu, const std::string& node = "") {
  PodFacts p = gpuPod(name, gpus);
  p.containers[0].requests["cpu"] = cpu;
  p.node_name = node;
  p.phase = node.empty() ? "Pending" : "Running";
  return p;
}

// Refreshes the request mix at every request.
SchedulerConfig mixConfig() {
  SchedulerConfig config;
  config.policy = troupe::sched::builtinPolicies().create("troupe").value();
  config.request_mix_refresh = 1;
  return config;
}

// One 8-GPU node with 64 CPUs (8 milli-CPU per milli-GPU) and one node without GPUs.
void addMixNodes(Scheduler& s) {
  troupe::model::NodeFacts gpu = gpuNode("n1", 8);
  gpu.cpu = "64";
  addNode(s, gpu);
  troupe::model::NodeFacts cpu_only;
  cpu_only.name = "cpu-only";
  cpu_only.cpu = "64";
  addNode(s, cpu_only);
}

}  // namespace

TEST_CASE("scheduler: bound pods the watch reports, never filtered, raise the mix's CPU load",
          "[scheduler][mix]") {
  Scheduler s(mixConfig());
  addMixNodes(s);
  // Four GPU pods through filter: 2 CPUs per GPU against the node's 8 is relaxed.
  for (int i = 0; i < 4; ++i) {
    REQUIRE(s.filter(podAsking("g" + std::to_string(i), 1, "2"), {"n1"}).passed.size() == 1);
  }
  CHECK(s.requestMix()->cpuLoad() == Approx(0.25));
  CHECK_FALSE(s.requestMix()->cpuTight());

  // Not counted: pending (filter will see it), finished, on a node without GPUs or unknown to
  // Troupe, without uid, or with a request that does not parse.
  s.noteWatchedDemand(podAsking("pending", 0, "16"));
  PodFacts done = podAsking("done", 0, "16", "n1");
  done.phase = "Succeeded";
  s.noteWatchedDemand(done);
  s.noteWatchedDemand(podAsking("elsewhere", 0, "16", "cpu-only"));
  s.noteWatchedDemand(podAsking("unknown-node", 0, "16", "n9"));
  PodFacts anonymous = podAsking("anonymous", 0, "16", "n1");
  anonymous.uid.clear();
  s.noteWatchedDemand(anonymous);
  PodFacts broken = podAsking("broken", 0, "16", "n1");
  broken.annotations["troupe.dev/gpu-milli"] = "lots";
  s.noteWatchedDemand(broken);
  CHECK(s.requestMix()->cpuLoad() == Approx(0.25));

  // CPU-only pods another scheduler bound to the GPU node: (4 x 2 + 2 x 16) / 6 CPUs per
  // 4/6 GPU is 10 milli-CPU per milli-GPU, 1.25x the node's: CPU-bound.
  s.noteWatchedDemand(podAsking("web-0", 0, "16", "n1"));
  s.noteWatchedDemand(podAsking("web-1", 0, "16", "n1"));
  CHECK(s.requestMix()->cpuLoad() == Approx(1.25));
  CHECK(s.requestMix()->cpuBound());
  // Seen again (a status update, a relist): still once each.
  s.noteWatchedDemand(podAsking("web-0", 0, "16", "n1"));
  s.noteWatchedDemand(podAsking("web-1", 0, "16", "n1"));
  CHECK(s.requestMix()->cpuLoad() == Approx(1.25));
}

TEST_CASE("scheduler: a pod both filtered and then watched bound counts once in the mix",
          "[scheduler][mix]") {
  Scheduler s(mixConfig());
  addMixNodes(s);
  const PodFacts g = podAsking("g", 1, "2");
  REQUIRE(s.filter(g, {"n1"}).passed == std::vector<std::string>{"n1"});
  REQUIRE(s.reserve(g.uid, g.ns, g.name, "n1").isOk());
  s.noteWatchedDemand(podAsking("g", 1, "2", "n1"));  // the watch's echo of the binding
  s.noteWatchedDemand(podAsking("web", 0, "14", "n1"));
  // One of each: (2 + 14) / 2 CPUs per half a GPU. Counted twice, g would make it (4 + 14) / 3
  // per 2/3 of a GPU.
  REQUIRE(s.requestMix()->entries().size() == 2);
  CHECK(s.requestMix()->entries()[0].probability == Approx(0.5));
  CHECK(s.requestMix()->cpuLoad() == Approx(2.0));
  // A filter of a pod the watch already counted does not count it again.
  PodFacts again = podAsking("web", 0, "14");
  REQUIRE(s.filter(again, {"n1"}).passed.size() == 1);
  CHECK(s.requestMix()->cpuLoad() == Approx(2.0));
}
