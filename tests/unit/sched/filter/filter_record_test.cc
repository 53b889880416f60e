// A bind places a pod only where its latest filter passed it (security review K2, standalone):
// the core refuses a pod it never filtered, a node the filter did not pass, and a node that was
// created after the filter under a name or ordinal the filter saw.
#include <catch2/catch.hpp>
#include <random>
#include <set>

#include "support/fixtures.h"
#include "troupe/sched/cluster/node_ordinal_set.h"
#include "troupe/sched/scheduler/scheduler.h"

namespace {

using troupe::Code;
using troupe::sched::NodeOrdinalSet;
using troupe::sched::PodFacts;
using troupe::sched::Scheduler;
using troupe::sched::SchedulerConfig;
using troupe::testing::gpuNode;
using troupe::testing::gpuPod;

struct TwoNodes {
  Scheduler s;
  explicit TwoNodes(bool narrow) : s(config(narrow)) {
    REQUIRE(s.upsertNode(gpuNode("n1", 8)).isOk());
    REQUIRE(s.upsertNode(gpuNode("n2", 8)).isOk());
  }
  static SchedulerConfig config(bool narrow) {
    SchedulerConfig c;
    c.narrow_to_best = narrow;
    return c;
  }
};

troupe::Status reserveOn(Scheduler& s, const PodFacts& pod, const std::string& node) {
  auto r = s.reserve(pod.uid, pod.ns, pod.name, node);
  return r.isOk() ? troupe::Status::ok() : r.status();
}

}  // namespace

TEST_CASE("filter record: a pod filtered onto one node is not reserved on another",
          "[scheduler][bind-guard]") {
  const bool narrow = GENERATE(false, true);
  TwoNodes world(narrow);
  Scheduler& s = world.s;
  const PodFacts pod = gpuPod("victim", 0);  // no GPUs at all, as in K2: it fits anywhere
  REQUIRE(s.filter(pod, {"n2"}).passed == std::vector<std::string>{"n2"});
  troupe::Status refused = reserveOn(s, pod, "n1");
  REQUIRE_FALSE(refused.isOk());
  CHECK(refused.code() == Code::kFailedPrecondition);
  CHECK_THAT(refused.message(),
             Catch::Contains("node n1 did not pass Troupe's filter for pod default/victim"));
  CHECK_FALSE(s.allocationOf(pod.uid));
  CHECK(reserveOn(s, pod, "n2").isOk());
}

TEST_CASE("filter record: narrowing records only the node it kept", "[scheduler][bind-guard]") {
  TwoNodes world(/*narrow=*/true);
  Scheduler& s = world.s;
  const PodFacts pod = gpuPod("p", 2);
  auto f = s.filter(pod, {"n1", "n2"});
  REQUIRE(f.passed.size() == 1);
  const std::string kept = f.passed.front();
  const std::string other = kept == "n1" ? "n2" : "n1";
  // The fitting node Troupe did not choose is left out of the answer (not listed as failed,
  // which cost kube-scheduler a status per node), yet a bind there is still refused.
  CHECK_FALSE(f.failed.contains(other));
  CHECK_THAT(reserveOn(s, pod, other).message(), Catch::Contains("did not pass Troupe's filter"));
  CHECK(reserveOn(s, pod, kept).isOk());
}

TEST_CASE("filter record: without narrowing every passed node may be chosen", "[scheduler][bind-guard]") {
  TwoNodes world(/*narrow=*/false);
  Scheduler& s = world.s;
  const PodFacts a = gpuPod("a", 2);
  const PodFacts b = gpuPod("b", 2);
  REQUIRE(s.filter(a, {"n1", "n2"}).passed.size() == 2);
  REQUIRE(s.filter(b, {"n1", "n2"}).passed.size() == 2);
  CHECK(reserveOn(s, a, "n1").isOk());
  CHECK(reserveOn(s, b, "n2").isOk());
}

TEST_CASE("filter record: a pod only prioritized, or never seen, is refused by name",
          "[scheduler][bind-guard]") {
  TwoNodes world(false);
  Scheduler& s = world.s;
  const PodFacts pod = gpuPod("p", 1);
  troupe::Status never = reserveOn(s, pod, "n1");
  CHECK(never.code() == Code::kFailedPrecondition);
  CHECK_THAT(never.message(), Catch::Contains("no record of pod default/p"));
  (void)s.prioritize(pod, {"n1", "n2"});  // prioritize remembers the pod, but filters nothing
  troupe::Status scored = reserveOn(s, pod, "n1");
  CHECK(scored.code() == Code::kFailedPrecondition);
  CHECK_THAT(scored.message(), Catch::Contains("passing its filter"));
  CHECK_FALSE(s.allocationOf(pod.uid));
}

TEST_CASE("filter record: the latest filter is the one that counts", "[scheduler][bind-guard]") {
  TwoNodes world(false);
  Scheduler& s = world.s;
  const PodFacts pod = gpuPod("p", 1);
  REQUIRE(s.filter(pod, {"n1"}).passed.size() == 1);
  REQUIRE(s.filter(pod, {"n2"}).passed.size() == 1);
  CHECK_FALSE(reserveOn(s, pod, "n1").isOk());
  CHECK(reserveOn(s, pod, "n2").isOk());
}

TEST_CASE("filter record: a node that failed the filter is refused even when it fits later",
          "[scheduler][bind-guard]") {
  TwoNodes world(false);
  Scheduler& s = world.s;
  const PodFacts big = gpuPod("big", 8);
  REQUIRE(s.filter(big, {"n1"}).passed.size() == 1);
  REQUIRE(reserveOn(s, big, "n1").isOk());
  const PodFacts pod = gpuPod("p", 4);
  auto f = s.filter(pod, {"n1", "n2"});
  REQUIRE(f.passed == std::vector<std::string>{"n2"});
  REQUIRE(s.release(big.uid));  // n1 is free again, but the pod was never checked there
  CHECK_THAT(reserveOn(s, pod, "n1").message(), Catch::Contains("did not pass"));
}

TEST_CASE("filter record: a node created after the filter is not the node it passed",
          "[scheduler][bind-guard]") {
  TwoNodes world(false);
  Scheduler& s = world.s;
  const PodFacts pod = gpuPod("p", 1);
  REQUIRE(s.filter(pod, {"n1", "n2"}).passed.size() == 2);
  SECTION("deleted and created again under the same name") {
    REQUIRE(s.removeNode("n1"));
    REQUIRE(s.upsertNode(gpuNode("n1", 8)).isOk());
    CHECK_THAT(reserveOn(s, pod, "n1").message(), Catch::Contains("did not pass"));
    CHECK(reserveOn(s, pod, "n2").isOk());
  }
  SECTION("another node reusing the ordinal of a removed one") {
    REQUIRE(s.removeNode("n1"));
    REQUIRE(s.upsertNode(gpuNode("n3", 8)).isOk());
    CHECK_THAT(reserveOn(s, pod, "n3").message(), Catch::Contains("did not pass"));
  }
  SECTION("a changed node that still exists keeps its filter verdict") {
    REQUIRE(s.upsertNode(gpuNode("n1", 4)).isOk());
    CHECK(reserveOn(s, pod, "n1").isOk());
  }
}

TEST_CASE("node ordinal set: a list when small, a bitset when that is smaller, same answers",
          "[scheduler][bind-guard]") {
  CHECK(NodeOrdinalSet().empty());
  CHECK_FALSE(NodeOrdinalSet().contains(0));
  NodeOrdinalSet one({4999});
  CHECK(one.size() == 1);
  CHECK(one.contains(4999));
  CHECK_FALSE(one.contains(4998));
  CHECK(one.bytes() <= 8);  // one ordinal, not 5,000 bits
  std::vector<uint32_t> all(5000);
  for (uint32_t i = 0; i < all.size(); ++i) all[i] = i;
  NodeOrdinalSet dense(all);
  CHECK(dense.size() == 5000);
  CHECK(dense.bytes() <= 5000 / 8 + 8);  // a bit per node
  CHECK(dense.contains(0));
  CHECK(dense.contains(4999));
  CHECK_FALSE(dense.contains(5000));
  CHECK_FALSE(dense.contains(1u << 31));

  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    const uint32_t range = 1 + rng() % 3000;
    std::vector<uint32_t> in;
    const size_t n = rng() % 400;
    for (size_t i = 0; i < n; ++i) in.push_back(rng() % range);
    std::set<uint32_t> truth(in.begin(), in.end());
    NodeOrdinalSet set(in);
    REQUIRE(set.size() == truth.size());
    for (uint32_t o = 0; o < range + 70; ++o) REQUIRE(set.contains(o) == (truth.count(o) > 0));
  }
}
