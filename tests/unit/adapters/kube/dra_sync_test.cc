// DraSync on its own, with a fake owner: slice changes re-apply the nodes they name, allocated
// claims on served nodes become holdings in the core (recorded once, released when gone), a
// bound GPU pod holds a provisional count until its claim is seen, and half a list records nothing.
#include "adapters/kube/dra/dra_sync.h"

#include <catch2/catch.hpp>
#include <mutex>
#include <set>
#include <sstream>

#include "support/fixtures.h"

namespace {

using troupe::kube::DraClaimFacts;
using troupe::kube::DraDevice;
using troupe::kube::DraDeviceRef;
using troupe::kube::DraSliceFacts;
using troupe::kube::DraSync;
using troupe::kube::PodView;

const char* kDriver = "gpu.nvidia.com";

struct Owner {
  std::mutex mu;
  std::set<std::string> served;
  std::vector<std::set<std::string>> reapplied;
};

struct World {
  std::ostringstream log;
  troupe::adapters::Logger logger{log, troupe::adapters::LogLevel::kDebug};
  troupe::sched::Scheduler scheduler{troupe::sched::SchedulerConfig{}};
  Owner owner;
  DraSync dra{
      scheduler,
      logger,
      {},
      DraSync::Owner{owner.mu, [this](const std::string& node) { return owner.served.count(node) > 0; },
                     [this] { return owner.served; },
                     [this](const std::set<std::string>& nodes) { owner.reapplied.push_back(nodes); }}};

  World() {
    REQUIRE(scheduler.upsertNode(troupe::testing::gpuNode("d1", 4)).isOk());
    owner.served.insert("d1");
  }
  int held(const std::string& holder) {
    std::optional<troupe::model::Allocation> a = scheduler.allocationOf(holder);
    return a ? a->unknown_gpus : 0;
  }
};

DraSliceFacts slice(const std::string& node, int devices) {
  DraSliceFacts s{node, kDriver, node, {}};
  for (int i = 0; i < devices; ++i)
    s.devices.push_back(DraDevice{"gpu-" + std::to_string(i), "NVIDIA H200", 0});
  return s;
}

DraClaimFacts claim(const std::string& name, std::vector<int> devices,
                    std::vector<std::string> reserved_for) {
  DraClaimFacts c{
      "uid-" + name, "default", name, {}, std::move(reserved_for), static_cast<int>(devices.size())};
  for (int d : devices) c.allocated.push_back(DraDeviceRef{kDriver, "d1", "gpu-" + std::to_string(d)});
  return c;
}

PodView boundPod(const std::string& uid, int gpus) {
  PodView p;
  p.facts = troupe::testing::gpuPod(uid, gpus);
  p.facts.uid = uid;
  p.facts.node_name = "d1";
  p.gpus = gpus;
  return p;
}

}  // namespace

TEST_CASE("dra sync: a slice change has the owner re-apply the nodes it names", "[kube][dra]") {
  World w;
  w.dra.applySlice("d1-slice", slice("d1", 4));
  REQUIRE(w.owner.reapplied.size() == 1);
  CHECK(w.owner.reapplied.back().count("d1") == 1);
  {
    std::lock_guard lock(w.owner.mu);
    CHECK(w.dra.nodeDevicesLocked("d1").devices == 4);
    CHECK(w.dra.nodeDevicesLocked("d1").product == "NVIDIA H200");
  }
  w.dra.deleteSlice("d1-slice");
  REQUIRE(w.owner.reapplied.size() == 2);
  CHECK(w.owner.reapplied.back() == std::set<std::string>{"d1"});
  std::lock_guard lock(w.owner.mu);
  CHECK(w.dra.nodeDevicesLocked("d1").devices == 0);
}

TEST_CASE("dra sync: an allocated claim is held in the core once, and released when deleted", "[kube][dra]") {
  World w;
  w.dra.applySlice("d1-slice", slice("d1", 4));
  w.dra.applyClaim(claim("c", {0, 1}, {"p1"}));
  CHECK(w.held("p1") == 2);
  {
    std::lock_guard lock(w.owner.mu);
    CHECK(w.dra.holdersLocked() == 1);
    CHECK(w.dra.gpusHeldLocked() == 2);
  }
  w.dra.applyClaim(claim("c", {0, 1}, {"p1"}));  // the same again: nothing changes
  CHECK(w.held("p1") == 2);
  w.dra.applyClaim(claim("c", {0, 1, 2}, {"p1"}));  // resized: replaced
  CHECK(w.held("p1") == 3);
  w.dra.deleteClaim("uid-c");
  CHECK_FALSE(w.scheduler.allocationOf("p1").has_value());
  std::lock_guard lock(w.owner.mu);
  CHECK(w.dra.holdersLocked() == 0);
}

TEST_CASE("dra sync: nothing is recorded while a list is under way", "[kube][dra]") {
  World w;
  w.dra.applySlice("d1-slice", slice("d1", 4));
  w.dra.claimHandler().beginList();
  w.dra.applyClaim(claim("c", {0}, {"p1"}));
  CHECK_FALSE(w.scheduler.allocationOf("p1").has_value());
  w.dra.claimHandler().endList();
  CHECK(w.held("p1") == 1);
  // A slice list re-applies every served node and every node a slice names, once, at its end.
  const size_t before = w.owner.reapplied.size();
  w.dra.sliceHandler().beginList();
  CHECK(w.owner.reapplied.size() == before);
  w.dra.sliceHandler().endList();
  REQUIRE(w.owner.reapplied.size() == before + 1);
  CHECK(w.owner.reapplied.back() == std::set<std::string>{"d1"});
}

TEST_CASE("dra sync: a bound GPU pod holds a provisional count until its claim is seen", "[kube][dra]") {
  World w;
  w.dra.applySlice("d1-slice", slice("d1", 4));
  {
    std::lock_guard lock(w.owner.mu);
    w.dra.notePodLocked(boundPod("p1", 2), 7);
  }
  CHECK(w.held("p1") == 2);
  w.dra.applyClaim(claim("c", {3}, {"p1"}));  // the claim replaces the provisional count
  CHECK(w.held("p1") == 1);
  std::lock_guard lock(w.owner.mu);
  CHECK(w.dra.podsNotListedLocked(7).empty());
  CHECK(w.dra.podsNotListedLocked(8) == std::vector<std::string>{"p1"});
  // Deleted: its claim holds nothing now (the owner releases what the core held for the pod).
  w.dra.forgetPodLocked("p1");
  CHECK(w.dra.holdersLocked() == 0);
  CHECK(w.dra.podsNotListedLocked(8).empty());
}

TEST_CASE("dra sync: claimGpus counts what the pod's claims ask, -1 while one is unknown", "[kube][dra]") {
  World w;
  w.dra.applyClaim(claim("c", {0, 1}, {}));
  troupe::sched::PodFacts pod = troupe::testing::gpuPod("p", 0);
  pod.ns = "default";
  pod.resource_claims.push_back(troupe::sched::PodClaim{"gpu", "c", ""});
  CHECK(w.dra.claimGpus(pod) == 2);
  pod.resource_claims.push_back(troupe::sched::PodClaim{"more", "missing", ""});
  CHECK(w.dra.claimGpus(pod) == -1);
}
