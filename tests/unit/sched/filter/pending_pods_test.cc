// PendingPods: the records between filter and bind, the tombstones of deleted pods, and the
// pod fingerprint that lets a later verb reuse the parsed request.
#include "troupe/sched/filter/pending_pods.h"

#include <catch2/catch.hpp>
#include <string>

#include "support/fixtures.h"

namespace {

using troupe::sched::GpuRequest;
using troupe::sched::NodeOrdinalSet;
using troupe::sched::PendingPods;
using troupe::sched::PodFacts;

PodFacts pod(const std::string& name) { return troupe::testing::gpuPod(name, 1); }

}  // namespace

TEST_CASE("pending pods: a record is first, then again; a stale filter does not overwrite the latest",
          "[scheduler][pending]") {
  PendingPods pending(100, 100);
  GpuRequest req;
  req.gpus = 2;
  uint64_t first = 0, second = 0;
  CHECK(pending.remember(pod("a"), req, 7, "ns/g", &first) == PendingPods::Seen::kFirst);
  CHECK(pending.remember(pod("a"), req, 7, "ns/g", &second) == PendingPods::Seen::kAgain);
  CHECK(second > first);
  REQUIRE(pending.find(pod("a").uid));
  CHECK_FALSE(pending.find(pod("a").uid)->filtered);
  CHECK(pending.find(pod("a").uid)->gang == "ns/g");
  CHECK(pending.find(pod("a").uid)->request.gpus == 2);
  REQUIRE(pending.request(pod("a").uid, 7));
  CHECK(pending.request(pod("a").uid, 7)->gpus == 2);
  CHECK_FALSE(pending.request(pod("a").uid, 8));  // the pod changed since
  CHECK_FALSE(pending.request("nobody", 7));

  pending.recordPassed(pod("a").uid, first, NodeOrdinalSet({1, 2}), 5);  // an older call finishing late
  CHECK_FALSE(pending.find(pod("a").uid)->filtered);
  pending.recordPassed(pod("a").uid, second, NodeOrdinalSet({3}), 6);
  const auto record = pending.find(pod("a").uid);
  REQUIRE(record);
  CHECK(record->filtered);
  CHECK(record->passed.contains(3));
  CHECK_FALSE(record->passed.contains(1));
  CHECK(record->births == 6);

  PodFacts anonymous = pod("b");
  anonymous.uid.clear();
  CHECK(pending.remember(anonymous, req, 1) == PendingPods::Seen::kFirst);  // not recorded
  CHECK(pending.size() == 1);
}

TEST_CASE("pending pods: a forgotten pod is refused from then on; tombstones are bounded",
          "[scheduler][pending]") {
  PendingPods pending(100, 2);
  GpuRequest req;
  REQUIRE(pending.remember(pod("a"), req, 1) == PendingPods::Seen::kFirst);
  pending.forget(pod("a").uid);
  CHECK_FALSE(pending.find(pod("a").uid));
  CHECK(pending.deleted(pod("a").uid));
  CHECK(pending.remember(pod("a"), req, 1) == PendingPods::Seen::kDeleted);
  CHECK(pending.size() == 0);

  pending.forget(pod("b").uid);
  pending.forget(pod("c").uid);  // the oldest tombstone (a) goes
  CHECK_FALSE(pending.deleted(pod("a").uid));
  CHECK(pending.deleted(pod("b").uid));
  CHECK(pending.deleted(pod("c").uid));
}

TEST_CASE("pending pods: past the maximum the oldest records go first", "[scheduler][pending]") {
  PendingPods pending(10, 10);
  GpuRequest req;
  for (int i = 0; i < 11; ++i) pending.remember(pod("p" + std::to_string(i)), req, 1);
  CHECK(pending.size() == 9);  // 11 over 10: the oldest tenth (+1) are forgotten
  CHECK_FALSE(pending.find(pod("p0").uid));
  CHECK_FALSE(pending.find(pod("p1").uid));
  CHECK(pending.find(pod("p10").uid));
}

TEST_CASE("pending pods: the fingerprint changes with what the request is parsed from",
          "[scheduler][pending]") {
  const PodFacts base = pod("a");
  const uint64_t fp = troupe::sched::podFingerprint(base);
  CHECK(troupe::sched::podFingerprint(pod("a")) == fp);
  PodFacts annotated = base;
  annotated.annotations["troupe.dev/gpu-model"] = "H100";
  CHECK(troupe::sched::podFingerprint(annotated) != fp);
  PodFacts more = base;
  more.containers[0].limits["nvidia.com/gpu"] = "2";
  CHECK(troupe::sched::podFingerprint(more) != fp);
  PodFacts labelled = base;
  labelled.labels["x"] = "y";
  CHECK(troupe::sched::podFingerprint(labelled) != fp);
  PodFacts sidecar = base;
  sidecar.init_containers.push_back({});
  CHECK(troupe::sched::podFingerprint(sidecar) != fp);
}
