// DRA accounting: ResourceSlices make nodes DRA-served, allocated ResourceClaims take exactly
// their devices (once), pods hold a provisional count until their claim is seen, deletions
// free devices, and Troupe's filter counts but never chooses GPUs there. Ends with a randomized
// sequence of claim and pod events (in random order, with duplicates) checked after every step
// against a model computed from scratch.
#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <set>

#include "adapters/kube/dra/dra_ledger.h"
#include "adapters/kube/dra/dra_objects.h"
#include "support/fixtures.h"
#include "support/kube_test_support.h"

namespace {

using nlohmann::json;
using troupe::kube::DraClaimFacts;
using troupe::kube::DraDevice;
using troupe::kube::DraDeviceRef;
using troupe::kube::DraLedger;
using troupe::kube::DraSliceFacts;
using troupe::kube::WatchEventType;
using troupe::kube::testing::podJson;
using troupe::kube::testing::toKube;

const char* kDriver = "gpu.nvidia.com";

// A node without device-plugin GPUs (DRA serves them).
json draNodeJson(const std::string& name) {
  return {{"metadata",
           {{"name", name}, {"resourceVersion", "1"}, {"labels", {{"kubernetes.io/hostname", name}}}}},
          {"spec", json::object()},
          {"status", {{"allocatable", {{"cpu", "64"}}}, {"capacity", {{"cpu", "64"}}}}}};
}

json sliceJson(const std::string& node, int devices, const std::string& driver = kDriver) {
  json devs = json::array();
  for (int i = 0; i < devices; ++i) {
    devs.push_back({{"name", "gpu-" + std::to_string(i)},
                    {"attributes", {{"productName", {{"string", "NVIDIA H200"}}}, {"index", {{"int", i}}}}},
                    {"capacity", {{"memory", {{"value", "141Gi"}}}}}});
  }
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceSlice"},
          {"metadata", {{"name", node + "-" + driver}, {"resourceVersion", "1"}}},
          {"spec",
           {{"driver", driver},
            {"nodeName", node},
            {"pool", {{"name", node}, {"generation", 1}, {"resourceSliceCount", 1}}},
            {"devices", devs}}}};
}

json claimJson(const std::string& name, int count, const std::string& node, const std::vector<int>& devices,
               const std::vector<std::string>& reserved_for) {
  json exactly = {{"deviceClassName", kDriver}, {"allocationMode", "ExactCount"}, {"count", count}};
  json request = {{"name", "gpu"}, {"exactly", exactly}};
  json claim = {{"apiVersion", "resource.k8s.io/v1"},
                {"kind", "ResourceClaim"},
                {"metadata", {{"name", name}, {"namespace", "default"}, {"uid", "claim-" + name}}}};
  claim["spec"]["devices"]["requests"] = json::array({request});
  if (!devices.empty()) {
    json results = json::array();
    for (int d : devices)
      results.push_back(
          {{"request", "gpu"}, {"driver", kDriver}, {"pool", node}, {"device", "gpu-" + std::to_string(d)}});
    claim["status"]["allocation"] = {{"devices", {{"results", results}}}};
    json reserved = json::array();
    for (const std::string& uid : reserved_for)
      reserved.push_back({{"resource", "pods"}, {"name", uid}, {"uid", uid}});
    if (!reserved.empty()) claim["status"]["reservedFor"] = reserved;
  }
  return claim;
}

struct World : troupe::kube::testing::SyncWorld {
  void node(const json& n) { sync.nodeHandler().event(WatchEventType::kAdded, toKube(n)); }
  void slice(const json& s, WatchEventType t = WatchEventType::kAdded) {
    sync.sliceHandler().event(t, toKube(s));
  }
  void claim(const json& c, WatchEventType t = WatchEventType::kModified) {
    sync.claimHandler().event(t, toKube(c));
  }
  void pod(const json& p, WatchEventType t = WatchEventType::kModified) {
    sync.podHandler().event(t, toKube(p));
  }
  // GPUs the core counts as used on the node, and how many it has.
  std::pair<int, int> usage(const std::string& node) {
    for (const auto& row : scheduler.summary().by_node) {
      if (row.node == node) return {static_cast<int>(row.used_milli / 1000), row.gpus};
    }
    return {-1, -1};
  }
};

json withClaim(json pod, const std::string& claim) {
  pod["status"]["extendedResourceClaimStatus"] = {{"resourceClaimName", claim}};
  return pod;
}

}  // namespace

TEST_CASE("dra objects: slices, claims and requests decode", "[kube][dra]") {
  auto slice = troupe::kube::decodeResourceSlice(toKube(sliceJson("n1", 2)));
  REQUIRE(slice.isOk());
  CHECK(slice.value().first == "n1-gpu.nvidia.com");
  CHECK(slice.value().second.node == "n1");
  CHECK(slice.value().second.pool == "n1");
  REQUIRE(slice.value().second.devices.size() == 2);
  CHECK(slice.value().second.devices[1].name == "gpu-1");
  CHECK(slice.value().second.devices[1].product == "NVIDIA H200");
  CHECK(slice.value().second.devices[1].memory_mib == 141 * 1024);
  CHECK_FALSE(troupe::kube::decodeResourceSlice(toKube(json{{"metadata", {{"name", "x"}}}})).isOk());
  json bad = sliceJson("n1", 1);
  bad["spec"]["devices"] = "many";
  auto refused = troupe::kube::decodeResourceSlice(toKube(bad));
  REQUIRE_FALSE(refused.isOk());
  CHECK(refused.status().message().find("spec.devices") != std::string::npos);

  auto claim = troupe::kube::decodeResourceClaim(toKube(claimJson("c", 2, "n1", {0, 3}, {"p1"})), {kDriver});
  REQUIRE(claim.isOk());
  CHECK(claim.value().uid == "claim-c");
  CHECK(claim.value().requested_gpus == 2);
  REQUIRE(claim.value().allocated.size() == 2);
  CHECK(claim.value().allocated[1].device == "gpu-3");
  CHECK(claim.value().reserved_for == std::vector<std::string>{"p1"});
  // Another class asks for no GPUs; firstAvailable counts its first alternative; All counts 1.
  CHECK(troupe::kube::decodeResourceClaim(toKube(claimJson("c", 2, "n1", {}, {})), {"other"})
            .value()
            .requested_gpus == 0);
  json spec = {
      {"devices",
       {{"requests",
         json::array(
             {{{"name", "a"},
               {"firstAvailable",
                json::array({{{"name", "big"}, {"deviceClassName", kDriver}, {"count", 4}},
                             {{"name", "small"}, {"deviceClassName", kDriver}, {"count", 1}}})}},
              {{"name", "b"}, {"exactly", {{"deviceClassName", kDriver}, {"allocationMode", "All"}}}}})}}}};
  CHECK(troupe::kube::requestedGpusOf(toKube(spec), {kDriver}) == 5);
}

TEST_CASE("dra: slices make a node DRA-served with their count, product and memory", "[kube][dra]") {
  World w;
  w.node(draNodeJson("d1"));
  CHECK_FALSE(w.sync.draServed("d1"));
  CHECK(w.usage("d1").second <= 0);
  w.slice(sliceJson("d1", 4));
  CHECK(w.sync.draServed("d1"));
  CHECK(w.usage("d1") == std::pair{0, 4});
  // Another driver's devices are not GPUs.
  w.slice(sliceJson("d1", 2, "nic.example.com"));
  CHECK(w.usage("d1") == std::pair{0, 4});
  // A node with device-plugin GPUs stays a device-plugin node even if a slice names it.
  w.node(troupe::kube::testing::nodeJson("p1", 8));
  w.slice(sliceJson("p1", 2));
  CHECK_FALSE(w.sync.draServed("p1"));
  CHECK(w.usage("p1") == std::pair{0, 8});
  // The slice goes: no GPUs there any more.
  w.slice(sliceJson("d1", 4), WatchEventType::kDeleted);
  CHECK_FALSE(w.sync.draServed("d1"));
}

TEST_CASE("dra: bad slices and claims are refused with a reason, never a crash", "[kube][dra]") {
  World w;
  w.node(draNodeJson("big"));
  w.slice(sliceJson("big", 65));  // more GPUs than a node model holds
  CHECK_FALSE(w.sync.draServed("big"));
  CHECK(w.log.str().find("Troupe handles at most 64 per node") != std::string::npos);
  w.slice(sliceJson("big", 8));  // fixed: the node is back with its GPUs
  CHECK(w.sync.draServed("big"));
  CHECK(w.usage("big") == std::pair{0, 8});
  // Objects without the fields Troupe needs are skipped with a warning naming them.
  w.sync.sliceHandler().event(WatchEventType::kAdded, toKube(json{{"metadata", {{"name", "s"}}}}));
  w.sync.claimHandler().event(WatchEventType::kAdded, toKube(json{{"metadata", {{"name", "c"}}}}));
  CHECK(w.log.str().find("ResourceSlice skipped") != std::string::npos);
  CHECK(w.log.str().find("ResourceClaim skipped") != std::string::npos);
  // A claim whose devices no slice publishes counts nowhere.
  w.claim(claimJson("ghost", 1, "elsewhere", {0}, {"uid-ghost"}));
  CHECK(w.usage("big").first == 0);
  CHECK(w.sync.stats().orphan_pods == 0);
}

TEST_CASE("dra: a pod counts provisionally until its claim, which replaces the count", "[kube][dra]") {
  World w;
  w.node(draNodeJson("d1"));
  w.slice(sliceJson("d1", 4));
  w.pod(withClaim(podJson("p", 2, "d1"), "p-gpu"));
  CHECK(w.usage("d1").first == 2);
  auto a = w.scheduler.allocationOf("uid-p");
  REQUIRE(a);
  CHECK(a->gpus.empty());
  CHECK(a->unknown_gpus == 2);
  // The claim kube-scheduler allocated: two devices, reserved for the pod; counted once.
  w.claim(claimJson("p-gpu", 2, "d1", {1, 2}, {"uid-p"}));
  w.claim(claimJson("p-gpu", 2, "d1", {1, 2}, {"uid-p"}));  // a duplicate event
  CHECK(w.usage("d1").first == 2);
  // A claim-only pod, its claim allocated before the pod is seen bound.
  w.claim(claimJson("solo", 1, "d1", {3}, {"uid-q"}));
  CHECK(w.usage("d1").first == 3);
  json q = podJson("q", 0, "d1");
  q["spec"]["resourceClaims"] = json::array({{{"name", "gpu"}, {"resourceClaimName", "solo"}}});
  w.pod(q);
  CHECK(w.usage("d1").first == 3);
  // Deleting the pod frees its claim's devices even though the claim stays allocated.
  w.pod(podJson("p", 2, "d1"), WatchEventType::kDeleted);
  CHECK(w.usage("d1").first == 1);
  // Deleting the claim frees the rest.
  w.claim(claimJson("solo", 1, "d1", {3}, {"uid-q"}), WatchEventType::kDeleted);
  CHECK(w.usage("d1").first == 0);
}

TEST_CASE("dra: a device in two claims counts once; an unreserved allocated claim holds", "[kube][dra]") {
  World w;
  w.node(draNodeJson("d1"));
  w.slice(sliceJson("d1", 4));
  w.claim(claimJson("a", 2, "d1", {0, 1}, {"uid-a"}));
  w.claim(claimJson("b", 2, "d1", {1, 2}, {"uid-b"}));
  CHECK(w.usage("d1").first == 3);
  w.claim(claimJson("c", 1, "d1", {3}, {}));
  CHECK(w.usage("d1").first == 4);
  // A shared claim: reserved for two pods, counted once, for the first that is not deleted.
  World s;
  s.node(draNodeJson("d1"));
  s.slice(sliceJson("d1", 4));
  s.pod(withClaim(podJson("x", 0, "d1"), "shared"));
  s.pod(withClaim(podJson("y", 0, "d1"), "shared"));
  s.claim(claimJson("shared", 2, "d1", {0, 1}, {"uid-x", "uid-y"}));
  CHECK(s.usage("d1").first == 2);
  s.pod(podJson("x", 0, "d1"), WatchEventType::kDeleted);
  CHECK(s.usage("d1").first == 2);
  REQUIRE(s.scheduler.allocationOf("uid-y"));
  s.pod(podJson("y", 0, "d1"), WatchEventType::kDeleted);
  CHECK(s.usage("d1").first == 0);
}

TEST_CASE("dra: slices that arrive after the pods move them to the DRA count, and back", "[kube][dra]") {
  World w;
  w.node(draNodeJson("d1"));
  w.pod(podJson("p", 2, "d1"));  // bound before Troupe knows d1 has GPUs
  w.slice(sliceJson("d1", 4));
  CHECK(w.usage("d1").first == 2);
  w.claim(claimJson("pc", 2, "d1", {0, 1}, {"uid-p"}));
  CHECK(w.usage("d1").first == 2);
  // A relist of the slices that still lists them changes nothing.
  w.sync.sliceHandler().beginList();
  w.sync.sliceHandler().listed(toKube(sliceJson("d1", 4)));
  w.sync.sliceHandler().endList();
  CHECK(w.usage("d1") == std::pair{2, 4});
  // The device plugin takes over the node: the pod is counted by its request again.
  json plugin = draNodeJson("d1");
  plugin["status"]["allocatable"]["nvidia.com/gpu"] = "8";
  w.node(plugin);
  CHECK_FALSE(w.sync.draServed("d1"));
  CHECK(w.usage("d1") == std::pair{2, 8});
}

TEST_CASE("dra: the filter counts on DRA nodes, says DRA chooses, and never picks indices", "[kube][dra]") {
  World w;
  w.node(draNodeJson("d1"));
  w.slice(sliceJson("d1", 4));
  w.node(troupe::kube::testing::nodeJson("p1", 8));
  w.claim(claimJson("taken", 3, "d1", {0, 1, 2}, {}));
  troupe::sched::PodFacts two = troupe::testing::gpuPod("two", 2);
  auto r = w.scheduler.filter(two, {"d1", "p1"});
  CHECK(r.passed == std::vector<std::string>{"p1"});
  REQUIRE(r.failed.size() == 1);
  const std::string reason = r.failed.begin()->second;
  CHECK(reason.find("DRA (gpu.nvidia.com) chooses the devices") != std::string::npos);
  troupe::sched::PodFacts one = troupe::testing::gpuPod("one", 1);
  REQUIRE(w.scheduler.filter(one, {"d1"}).passed == std::vector<std::string>{"d1"});
  auto a = w.scheduler.reserve(one.uid, one.ns, one.name, "d1");
  REQUIRE(a.isOk());
  CHECK(a.value().gpus.empty());
  CHECK(a.value().unknown_gpus == 1);
  CHECK(w.usage("d1").first == 4);
  // Shares and NVLink sets cannot be promised where DRA chooses.
  troupe::sched::PodFacts share = troupe::testing::gpuPod("share", 0);
  share.annotations["troupe.dev/gpu-milli"] = "500";
  CHECK(w.scheduler.filter(share, {"d1"}).unresolvable.size() == 1);
  // A claim-only pod goes to DRA nodes only.
  troupe::sched::PodFacts claims = troupe::testing::gpuPod("claims", 0);
  claims.resource_claims.push_back({"gpu", "solo-claim", ""});
  claims.claim_gpus = 1;
  w.claim(claimJson("other", 0, "d1", {}, {}));
  w.pod(withClaim(podJson("one", 1, "d1"), "x"), WatchEventType::kDeleted);
  auto c = w.scheduler.filter(claims, {"d1", "p1"});
  CHECK(c.passed == std::vector<std::string>{"d1"});
  CHECK(c.unresolvable.size() == 1);
  // Its count comes from the claim the watch saw; unknown claims hold it back.
  w.claim(claimJson("solo-claim", 2, "", {}, {}));
  CHECK(w.sync.claimGpus(claims) == 2);
  claims.resource_claims[0].claim_name = "nobody-made-it";
  CHECK(w.sync.claimGpus(claims) == -1);
}

TEST_CASE("dra: randomized claims and pods, in any order, with duplicates: each device counted once",
          "[kube][dra][random]") {
  const int kNodes = 3, kDevices = 4;
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    std::mt19937 rng(seed);
    World w;
    for (int n = 0; n < kNodes; ++n) {
      const std::string name = "d" + std::to_string(n);
      w.node(draNodeJson(name));
      w.slice(sliceJson(name, kDevices));
    }
    // The truth the events describe, and what Troupe should count from what it was shown.
    struct Pod {
      int node = -1;
      int gpus = 0;
      std::vector<int> devices;
      bool bound_seen = false, claim_seen = false, pod_deleted = false, claim_deleted = false;
    };
    std::map<int, Pod> pods;
    std::vector<std::set<int>> taken(kNodes);  // devices the (fake) scheduler handed out
    std::function<void()> last = [] {};
    auto podName = [](int i) { return "p" + std::to_string(i); };
    auto podEvent = [&](int i) {
      const Pod& p = pods[i];
      json j = withClaim(podJson(podName(i), p.gpus, "d" + std::to_string(p.node)), podName(i) + "-gpu");
      w.pod(j, p.pod_deleted ? WatchEventType::kDeleted : WatchEventType::kModified);
    };
    auto claimEvent = [&](int i) {
      const Pod& p = pods[i];
      json c = claimJson(podName(i) + "-gpu", p.gpus, "d" + std::to_string(p.node), p.devices,
                         {"uid-" + podName(i)});
      w.claim(c, p.claim_deleted ? WatchEventType::kDeleted : WatchEventType::kModified);
    };
    int next = 0;
    for (int step = 0; step < 120; ++step) {
      const int op = static_cast<int>(rng() % 6);
      if (op == 0 || pods.empty()) {
        // The scheduler places a new pod on free devices; Troupe hears of it later.
        const int node = static_cast<int>(rng() % kNodes);
        const int gpus = 1 + static_cast<int>(rng() % 2);
        if (kDevices - static_cast<int>(taken[node].size()) < gpus) continue;
        Pod p;
        p.node = node;
        p.gpus = gpus;
        for (int d = 0; d < kDevices && static_cast<int>(p.devices.size()) < gpus; ++d) {
          if (!taken[node].count(d)) p.devices.push_back(d);
        }
        for (int d : p.devices) taken[node].insert(d);
        pods[next++] = p;
        continue;
      }
      auto it = pods.begin();
      std::advance(it, static_cast<long>(rng() % pods.size()));
      const int i = it->first;
      Pod& p = it->second;
      if (op == 1 && !p.pod_deleted) {
        p.bound_seen = true;
        podEvent(i);
        last = [&, i] { podEvent(i); };
      } else if (op == 2 && !p.claim_deleted) {
        p.claim_seen = true;
        claimEvent(i);
        last = [&, i] { claimEvent(i); };
      } else if (op == 3 && (p.bound_seen || p.claim_seen)) {
        p.pod_deleted = true;  // the pod goes; its claim (if any) stays allocated
        podEvent(i);
        last = [&, i] { podEvent(i); };
      } else if (op == 4 && p.pod_deleted) {
        p.claim_deleted = true;  // the claim goes too: the devices are the scheduler's again
        if (p.claim_seen) claimEvent(i);
        for (int d : p.devices) taken[p.node].erase(d);
        pods.erase(it);
        last = [] {};
      } else if (op == 5) {
        last();  // the same event again
      }
      // Troupe's count from what it was shown: a live pod holds its GPUs (through its claim
      // once seen, else provisionally once bound); a deleted pod's claim holds nothing.
      std::vector<int> want(kNodes, 0);
      for (const auto& [id, q] : pods) {
        if (q.pod_deleted) continue;
        if (q.claim_seen) {
          want[q.node] += static_cast<int>(q.devices.size());
        } else if (q.bound_seen) {
          want[q.node] += q.gpus;
        }
      }
      for (int n = 0; n < kNodes; ++n) {
        INFO("seed " << seed << " step " << step << " node d" << n);
        const auto [used, devices] = w.usage("d" + std::to_string(n));
        CHECK(used == want[n]);
        CHECK(devices == kDevices);
        CHECK(used <= devices);  // free + used = devices, never more
      }
    }
  }
}

TEST_CASE("dra: a claim-only pod with CPU requests keeps its device count when seen bound",
          "[kube][dra][cpu]") {
  World w;
  w.node(draNodeJson("d1"));
  w.slice(sliceJson("d1", 4));
  w.claim(claimJson("one-gpu", 1, "", {}, {}));
  troupe::sched::PodFacts pod = troupe::testing::gpuPod("claim-only", 0);
  pod.containers[0].requests["cpu"] = "2";
  pod.resource_claims.push_back({"gpu", "one-gpu", ""});
  pod.claim_gpus = w.sync.claimGpus(pod);
  REQUIRE(pod.claim_gpus == 1);
  REQUIRE(w.scheduler.filter(pod, {"d1"}).passed == std::vector<std::string>{"d1"});
  REQUIRE(w.scheduler.reserve(pod.uid, pod.ns, pod.name, "d1").isOk());
  CHECK(w.usage("d1").first == 1);
  // kube-scheduler allocated the claim; the watch shows the pod bound, with its CPU.
  w.claim(claimJson("one-gpu", 1, "d1", {2}, {"uid-claim-only"}));
  json seen = podJson("claim-only", 0, "d1", "", "Running");
  seen["spec"]["containers"][0]["resources"] = {{"requests", {{"cpu", "2"}}}};
  seen["spec"]["resourceClaims"] = json::array({{{"name", "gpu"}, {"resourceClaimName", "one-gpu"}}});
  w.pod(seen);
  w.pod(seen);
  CHECK(w.usage("d1").first == 1);
  REQUIRE(w.scheduler.allocationOf("uid-claim-only"));
  CHECK(w.scheduler.allocationOf("uid-claim-only")->unknown_gpus == 1);
  // A CPU-only pod on the DRA node: the DRA ledger's node, not tracked for its CPU.
  json web = podJson("web", 0, "d1", "", "Running");
  web["spec"]["containers"][0]["resources"] = {{"requests", {{"cpu", "8"}}}};
  w.pod(web);
  CHECK_FALSE(w.scheduler.allocationOf("uid-web"));
  CHECK(w.usage("d1").first == 1);
}
