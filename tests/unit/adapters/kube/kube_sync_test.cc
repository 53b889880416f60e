// Node and Pod objects from the API turned into the core's state: GPU accounting from the
// troupe.dev/gpus annotation, unknown indices for pods bound by others, release on finish
// and delete, relists, nodes that arrive after their pods, and idempotence.
#include <catch2/catch.hpp>
#include <set>
#include <sstream>

#include "adapters/common/logger.h"
#include "adapters/kube/watch/cluster_sync.h"
#include "adapters/kube/watch/kube_objects.h"
#include "support/fixtures.h"
#include "support/kube_test_support.h"
#include "troupe/sched/scheduler/scheduler.h"

namespace {

using nlohmann::json;
using troupe::kube::ClusterSync;
using troupe::kube::decodePod;
using troupe::kube::Json;
using troupe::kube::parseKubeJson;
using troupe::kube::WatchEventType;
using troupe::kube::testing::nodeJson;
using troupe::kube::testing::podJson;
using troupe::kube::testing::toKube;

struct World : troupe::kube::testing::SyncWorld {
  void node(const json& n) { sync.nodeHandler().event(WatchEventType::kAdded, toKube(n)); }
  void pod(const json& p, WatchEventType t = WatchEventType::kModified) {
    sync.podHandler().event(t, toKube(p));
  }
  std::vector<int> gpus(const std::string& uid) {
    auto a = scheduler.allocationOf(uid);
    return a ? a->gpus : std::vector<int>{-1};
  }
  int unknown(const std::string& uid) {
    auto a = scheduler.allocationOf(uid);
    return a ? a->unknown_gpus : -1;
  }
  int freeOn(const std::string& node) {
    troupe::sched::PodFacts p = troupe::testing::gpuPod("probe", 1);
    int n = 0;
    // How many single GPUs can still be reserved there (each probe is released afterwards).
    std::vector<std::string> uids;
    for (int i = 0; i < 64; ++i) {
      p.uid = "probe-" + std::to_string(i);
      p.name = p.uid;
      if (scheduler.filter(p, {node}).passed.empty()) break;
      if (!scheduler.reserve(p.uid, "default", p.name, node).isOk()) break;
      uids.push_back(p.uid);
      ++n;
    }
    for (const auto& u : uids) scheduler.release(u);
    return n;
  }
};

}  // namespace

TEST_CASE("kube JSON: bulky members are skipped, labels and annotations are kept whole", "[kube][sync]") {
  json pod = podJson("p", 2);
  pod["metadata"]["labels"]["volumes"] = "keep-me";
  pod["metadata"]["annotations"] = {{"managedFields", "keep-me-too"}};
  auto doc = parseKubeJson(pod.dump());
  REQUIRE(doc.isOk());
  const Json& d = doc.value();
  CHECK_FALSE(d["metadata"].contains("managedFields"));
  CHECK_FALSE(d["spec"]["containers"][0].contains("env"));
  CHECK(d["metadata"]["labels"]["env"] == "prod");
  CHECK(d["metadata"]["labels"]["volumes"] == "keep-me");
  CHECK(d["metadata"]["annotations"]["managedFields"] == "keep-me-too");
  CHECK(d["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "2");
  CHECK_FALSE(parseKubeJson("{\"a\":").isOk());
}

TEST_CASE("kube pods: decoding the shared fixture's real pod", "[kube][sync]") {
  auto shared = troupe::testing::sharedDir();
  if (!shared) {
    WARN("shared fixtures not found; skipped");
    return;
  }
  auto text = troupe::testing::readFile(*shared + "/fixtures/kube-scheduler/filter-full-nodes.json");
  REQUIRE(text);
  json body = json::parse(*text);
  json pod = body["Pod"];
  pod["spec"]["nodeName"] = body["Nodes"]["items"][0]["metadata"]["name"];
  pod["metadata"]["annotations"]["troupe.dev/gpus"] = "4,5,6,7";
  auto doc = parseKubeJson(pod.dump());
  REQUIRE(doc.isOk());
  auto view = decodePod(doc.value());
  INFO(view.status().message());
  REQUIRE(view.isOk());
  CHECK(view.value().facts.uid == "3c9a6f1e-7b2d-4e8a-9f10-2a6b5c4d8e71");
  CHECK(view.value().gpus == 4);
  CHECK(view.value().holdsGpus());
  CHECK(view.value().assigned == std::vector<int>{4, 5, 6, 7});

  // The same nodes through the node path: the core learns them.
  World w;
  for (const json& n : body["Nodes"]["items"]) w.node(n);
  CHECK(w.scheduler.nodeCount() == body["Nodes"]["items"].size());
  w.pod(pod);
  CHECK(w.gpus("3c9a6f1e-7b2d-4e8a-9f10-2a6b5c4d8e71") == std::vector<int>{4, 5, 6, 7});
}

TEST_CASE("kube sync: annotated pods hold their GPUs; the echo of a bind changes nothing", "[kube][sync]") {
  World w;
  w.node(nodeJson("n1", 8));
  REQUIRE(w.freeOn("n1") == 8);
  w.pod(podJson("a", 4, "n1", "0,1,2,3"));
  CHECK(w.gpus("uid-a") == std::vector<int>{0, 1, 2, 3});
  CHECK(w.freeOn("n1") == 4);
  w.pod(podJson("a", 4, "n1", "0,1,2,3"));  // again (a resync, or the binder's confirmation)
  CHECK(w.gpus("uid-a") == std::vector<int>{0, 1, 2, 3});
  CHECK(w.freeOn("n1") == 4);
  CHECK(w.sync.stats().gpu_pods == 1);

  // Troupe's binder reserved GPUs 4,5 for b; the watch then shows b bound with them.
  troupe::sched::PodFacts b = troupe::testing::gpuPod("b", 2);
  b.uid = "uid-b";
  REQUIRE_FALSE(w.scheduler.filter(b, {"n1"}).passed.empty());
  auto reserved = w.scheduler.reserve("uid-b", "default", "b", "n1");
  REQUIRE(reserved.isOk());
  const std::string held = troupe::kube::formatGpus(reserved.value().gpus);
  w.pod(podJson("b", 2));  // unbound updates (the annotation patch) leave the reservation alone
  CHECK(w.gpus("uid-b") == reserved.value().gpus);
  w.pod(podJson("b", 2, "n1", held));
  CHECK(w.gpus("uid-b") == reserved.value().gpus);
  CHECK(w.freeOn("n1") == 2);
}

TEST_CASE("kube sync: pods bound by others hold GPUs at unknown indices", "[kube][sync]") {
  World w;
  w.node(nodeJson("n1", 8));
  w.pod(podJson("other", 3, "n1"));  // no annotation: bound by another scheduler
  CHECK(w.unknown("uid-other") == 3);
  CHECK(w.freeOn("n1") == 5);
  // A malformed or mismatched annotation counts the same way, with a warning.
  w.pod(podJson("bad", 2, "n1", "0,zero"));
  CHECK(w.unknown("uid-bad") == 2);
  w.pod(podJson("short", 2, "n1", "7"));
  CHECK(w.unknown("uid-short") == 2);
  CHECK(w.freeOn("n1") == 1);
  CHECK(w.log.str().find("annotation unusable") != std::string::npos);
  // Pods without GPUs leave nothing behind.
  w.pod(podJson("cpu", 0, "n1"));
  CHECK_FALSE(w.scheduler.allocationOf("uid-cpu"));
  CHECK(w.sync.stats().gpu_pods == 3);
  CHECK(w.sync.stats().unknown_pods == 3);
}

TEST_CASE("kube sync: an annotation that overlaps another pod counts as unknown, never twice",
          "[kube][sync]") {
  World w;
  w.node(nodeJson("n1", 8));
  w.pod(podJson("a", 2, "n1", "0,1"));
  w.pod(podJson("b", 2, "n1", "1,2"));  // GPU 1 is a's
  CHECK(w.gpus("uid-a") == std::vector<int>{0, 1});
  CHECK(w.unknown("uid-b") == 2);
  CHECK(w.sync.stats().conflicts == 1);
  CHECK(w.freeOn("n1") == 4);
  w.pod(podJson("b", 2, "n1", "1,2"));  // the same again: no new conflict
  CHECK(w.sync.stats().conflicts == 1);
  w.pod(podJson("idx", 1, "n1", "9"));  // out of range
  CHECK(w.unknown("uid-idx") == 1);
}

TEST_CASE("kube sync: finished and deleted pods release their GPUs", "[kube][sync]") {
  World w;
  w.node(nodeJson("n1", 8));
  w.pod(podJson("a", 4, "n1", "0,1,2,3"));
  w.pod(podJson("b", 2, "n1"));
  REQUIRE(w.freeOn("n1") == 2);
  w.pod(podJson("a", 4, "n1", "0,1,2,3", "Succeeded"));
  CHECK_FALSE(w.scheduler.allocationOf("uid-a"));
  CHECK(w.freeOn("n1") == 6);
  w.pod(podJson("b", 2, "n1"), WatchEventType::kDeleted);
  CHECK_FALSE(w.scheduler.allocationOf("uid-b"));
  CHECK(w.freeOn("n1") == 8);
  // Terminating pods still hold theirs until they are gone.
  json t = podJson("t", 1, "n1", "5");
  t["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z";
  w.pod(t);
  CHECK(w.gpus("uid-t") == std::vector<int>{5});
  // A delete also drops what a binder held for an unbound pod.
  troupe::sched::PodFacts u = troupe::testing::gpuPod("u", 1);
  u.uid = "uid-u";
  REQUIRE_FALSE(w.scheduler.filter(u, {"n1"}).passed.empty());
  REQUIRE(w.scheduler.reserve("uid-u", "default", "u", "n1").isOk());
  w.pod(podJson("u", 1), WatchEventType::kDeleted);
  CHECK_FALSE(w.scheduler.allocationOf("uid-u"));
}

TEST_CASE("kube sync: a relist replaces the state; readiness after nodes and pods", "[kube][sync]") {
  World w;
  bool ready = false;
  w.sync.onSynced([&] { ready = true; });
  auto& nodes = w.sync.nodeHandler();
  auto& pods = w.sync.podHandler();
  nodes.beginList();
  nodes.listed(toKube(nodeJson("n1", 8)));
  nodes.listed(toKube(nodeJson("n2", 8)));
  nodes.endList();
  CHECK(w.sync.nodesSynced());
  CHECK_FALSE(ready);
  pods.beginList();
  pods.listed(toKube(podJson("a", 2, "n1", "0,1")));
  pods.listed(toKube(podJson("b", 2, "n2", "0,1")));
  pods.listed(toKube(podJson("pending", 2)));
  pods.endList();
  CHECK(ready);
  CHECK(w.sync.stats().gpu_pods == 2);

  // The watch was down: b was deleted and n2 removed meanwhile; the relist finds out.
  pods.beginList();
  pods.listed(toKube(podJson("a", 2, "n1", "0,1")));
  pods.endList();
  CHECK_FALSE(w.scheduler.allocationOf("uid-b"));
  CHECK(w.gpus("uid-a") == std::vector<int>{0, 1});
  nodes.beginList();
  nodes.listed(toKube(nodeJson("n1", 8)));
  nodes.endList();
  CHECK(w.scheduler.nodeCount() == 1);

  // What arrives (from another thread, e.g. the binder) after a list began survives its end.
  pods.beginList();
  w.sync.applyPod(decodePod(toKube(podJson("late", 1, "n1", "7"))).value());
  pods.listed(toKube(podJson("a", 2, "n1", "0,1")));
  pods.endList();
  CHECK(w.gpus("uid-late") == std::vector<int>{7});
}

TEST_CASE("kube sync: pods on unknown nodes wait for them; a node's removal and return", "[kube][sync]") {
  World w;
  w.pod(podJson("early", 2, "n9", "6,7"));
  CHECK_FALSE(w.scheduler.allocationOf("uid-early"));
  CHECK(w.sync.stats().orphan_pods == 1);
  w.node(nodeJson("n9", 8));
  CHECK(w.gpus("uid-early") == std::vector<int>{6, 7});
  CHECK(w.sync.stats().orphan_pods == 0);

  w.sync.nodeHandler().event(WatchEventType::kDeleted, toKube(nodeJson("n9", 8)));
  CHECK(w.scheduler.nodeCount() == 0);
  CHECK_FALSE(w.scheduler.allocationOf("uid-early"));
  w.node(nodeJson("n9", 8));
  CHECK(w.gpus("uid-early") == std::vector<int>{6, 7});

  // Unchanged node updates (heartbeats) do not touch the core; a label change does.
  json n = nodeJson("n9", 8);
  n["status"]["conditions"][0]["lastHeartbeatTime"] = "2026-01-01T00:00:01Z";
  w.node(n);
  n["metadata"]["labels"]["nvidia.com/gpu.product"] = "NVIDIA-A100-SXM4-80GB";
  w.node(n);
  CHECK(w.gpus("uid-early") == std::vector<int>{6, 7});
  // Broken facts take the node out of scheduling, with a warning naming it.
  n["metadata"]["annotations"] = {{"troupe.dev/gpu-topology", "not a matrix"}};
  w.node(n);
  CHECK(w.scheduler.nodeCount() == 0);
  CHECK(w.log.str().find("node facts rejected") != std::string::npos);
}

TEST_CASE("kube sync: shared GPU pods", "[kube][sync]") {
  World w;
  w.node(nodeJson("n1", 2));
  json p = podJson("half", 0, "n1", "1");
  p["metadata"]["annotations"]["troupe.dev/gpu-milli"] = "500";
  w.pod(p);
  auto a = w.scheduler.allocationOf("uid-half");
  REQUIRE(a);
  CHECK(a->gpus == std::vector<int>{1});
  CHECK(a->milli_per_gpu == 500);
  CHECK(w.freeOn("n1") == 1);
}

TEST_CASE("kube nodes: allocatable CPU, memory and pods are tracked for the pods Troupe binds",
          "[kube][sync]") {
  json n = nodeJson("n1", 4);
  n["status"]["allocatable"]["cpu"] = "8";
  n["status"]["allocatable"]["memory"] = "16Gi";
  n["status"]["allocatable"]["pods"] = "110";
  auto facts = troupe::kube::decodeNode(toKube(n));
  REQUIRE(facts.isOk());
  CHECK(facts.value().cpu == "8");
  CHECK(facts.value().memory == "16Gi");
  CHECK(facts.value().pods == "110");

  World w;
  w.node(n);
  auto withCpu = [](const std::string& name, const std::string& cpu) {
    troupe::sched::PodFacts p = troupe::testing::gpuPod(name, 1);
    p.containers[0].requests["cpu"] = cpu;
    return p;
  };
  const troupe::sched::PodFacts big = withCpu("big", "6");
  REQUIRE(w.scheduler.filter(big, {"n1"}).passed.size() == 1);
  REQUIRE(w.scheduler.reserve(big.uid, "default", big.name, "n1").isOk());
  // 3 GPUs are free, but only 2 of the node's 8 CPUs.
  auto r = w.scheduler.filter(withCpu("more", "3"), {"n1"});
  CHECK(r.passed.empty());
  REQUIRE(r.failed.contains("n1"));
  CHECK(r.failed.at("n1") == "troupe: insufficient free CPU");
  CHECK(w.scheduler.filter(withCpu("fits", "2"), {"n1"}).passed.size() == 1);
}

TEST_CASE("kube sync: watched rack labels, and their changes, reach the gang planner",
          "[kube][sync][topology]") {
  World w;
  auto racked = [](const std::string& name, const std::string& rack) {
    json n = nodeJson(name, 8);
    n["metadata"]["labels"]["troupe.dev/rack"] = rack;
    return n;
  };
  w.node(racked("k1", "r1"));
  w.node(racked("k2", "r2"));
  w.node(racked("k3", "r1"));
  // k3 moves to rack r2 (a relabel arrives as a watch update): only r2 now holds two nodes.
  w.sync.nodeHandler().event(WatchEventType::kModified, toKube(racked("k3", "r2")));
  std::set<std::string> steered;
  for (int i = 0; i < 2; ++i) {
    troupe::sched::PodFacts p = troupe::testing::gpuPod("w" + std::to_string(i), 8,
                                                        {{"troupe.dev/gang", "ring"},
                                                         {"troupe.dev/gang-size", "2"},
                                                         {"troupe.dev/topology-required", "rack"}});
    troupe::sched::FilterResult r = w.scheduler.filter(p, {"k1", "k2", "k3"});
    REQUIRE(r.passed.size() == 1);
    steered.insert(r.passed[0]);
  }
  CHECK(steered == std::set<std::string>{"k2", "k3"});
}

TEST_CASE("kube sync: a gang's pods terminating or deleted end the gang and free its plan", "[kube][sync]") {
  World w;
  w.node(nodeJson("n1", 8));
  w.node(nodeJson("n2", 8));
  auto member = [](const std::string& name) {
    troupe::sched::PodFacts p = troupe::testing::gpuPod(
        name, 8, {{troupe::sched::kGangName, "job"}, {troupe::sched::kGangSize, "2"}});
    return p;
  };
  auto memberJson = [](const std::string& name) {
    json p = podJson(name, 8);
    p["metadata"]["annotations"] = {{"troupe.dev/gang", "job"}, {"troupe.dev/gang-size", "2"}};
    return p;
  };
  REQUIRE(w.scheduler.filter(member("a"), {"n1", "n2"}).passed.size() == 1);
  REQUIRE(w.scheduler.filter(member("b"), {"n1", "n2"}).passed.size() == 1);
  REQUIRE(w.scheduler.summary().gangs.held_gpus == 16);
  // kubectl delete (with a grace period): the pod is terminating first.
  json a = memberJson("a");
  a["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z";
  w.pod(a);
  CHECK(w.scheduler.gangs().at(0).members == 1);
  w.pod(memberJson("b"), WatchEventType::kDeleted);
  CHECK(w.scheduler.gangs().empty());
  CHECK(w.scheduler.summary().gangs.held_gpus == 0);
  // kube-scheduler's filter of the terminating pod afterwards does not bring it back.
  CHECK(w.scheduler.filter(member("a"), {"n1", "n2"}).passed.empty());
  CHECK(w.scheduler.gangs().empty());
}

TEST_CASE("kube sync: bound pods in the list and the watch reach the request mix, once each",
          "[kube][sync][mix]") {
  std::ostringstream log;
  troupe::adapters::Logger logger{log, troupe::adapters::LogLevel::kDebug};
  troupe::sched::SchedulerConfig config;
  config.request_mix_refresh = 1;  // the mix shows every request at once
  troupe::sched::Scheduler scheduler{config};
  ClusterSync sync{scheduler, logger};
  auto& nodes = sync.nodeHandler();
  auto& pods = sync.podHandler();
  nodes.beginList();
  nodes.listed(toKube(nodeJson("n1", 8)));  // 64 CPUs: 8 milli-CPU per milli-GPU
  nodes.endList();
  auto cpuOnly = [](const std::string& name, const std::string& node, const std::string& cpu) {
    json p = podJson(name, 0, node, "", node.empty() ? "Pending" : "Running");
    p["spec"]["schedulerName"] = "default-scheduler";
    p["spec"]["containers"][0]["resources"] = {{"requests", {{"cpu", cpu}}}};
    return p;
  };
  // Bound before Troupe started: a GPU pod (1 CPU) and a CPU-only pod of another scheduler.
  pods.beginList();
  pods.listed(toKube(podJson("gpu", 1, "n1", "0", "Running")));
  pods.listed(toKube(cpuOnly("web", "n1", "15")));
  pods.listed(toKube(cpuOnly("waiting", "", "15")));  // pending: counted when filtered
  pods.endList();
  // (1 + 15) / 2 CPUs per half a GPU: 16 milli-CPU per milli-GPU, twice the node's.
  REQUIRE(scheduler.requestMix()->entries().size() == 2);
  CHECK(scheduler.requestMix()->cpuLoad() == Approx(2.0));
  CHECK(scheduler.requestMix()->cpuBound());
  // Later events of the same pods (status updates, a relist) do not count them again; a
  // finished pod is not counted.
  sync.podHandler().event(WatchEventType::kModified, toKube(cpuOnly("web", "n1", "15")));
  sync.podHandler().event(WatchEventType::kModified, toKube(podJson("gpu", 1, "n1", "0", "Running")));
  json done = cpuOnly("done", "n1", "15");
  done["status"]["phase"] = "Succeeded";
  sync.podHandler().event(WatchEventType::kModified, toKube(done));
  CHECK(scheduler.requestMix()->entries()[0].probability == Approx(0.5));
  CHECK(scheduler.requestMix()->cpuLoad() == Approx(2.0));
  // A new CPU-only pod bound by the watch: (1 + 30) / 3 per 1/3 GPU.
  sync.podHandler().event(WatchEventType::kAdded, toKube(cpuOnly("web-2", "n1", "15")));
  CHECK(scheduler.requestMix()->cpuLoad() == Approx(31.0 / 8));
}

TEST_CASE("kube sync: bound pods' CPU and memory count on GPU nodes, whoever bound them",
          "[kube][sync][cpu]") {
  World w;
  w.node(nodeJson("n1", 8));  // 64 CPUs
  json cpu_node = nodeJson("cpu-node", 0);
  cpu_node["metadata"]["labels"].erase("nvidia.com/gpu.count");
  w.node(cpu_node);
  REQUIRE_FALSE(w.scheduler.isGpuNode("cpu-node"));
  REQUIRE(w.scheduler.isGpuNode("n1"));
  auto cpuOnly = [](const std::string& name, const std::string& node, const std::string& cpu,
                    const std::string& memory = "1Gi") {
    json p = podJson(name, 0, node, "", "Running");
    p["spec"]["schedulerName"] = "default-scheduler";
    p["spec"]["containers"][0]["resources"] = {{"requests", {{"cpu", cpu}, {"memory", memory}}}};
    return p;
  };
  auto cpuOf = [&](const std::string& uid) -> int64_t {
    auto a = w.scheduler.allocationOf(uid);
    return a ? a->cpu_milli : -1;
  };
  // Two GPUs and 20 CPUs: fits n1 while its CPU is free.
  troupe::sched::PodFacts big = troupe::testing::gpuPod("big", 2);
  big.uid = "uid-big";
  big.containers[0].requests["cpu"] = "20";
  REQUIRE(w.scheduler.filter(big, {"n1"}).passed.size() == 1);

  // A GPU pod another scheduler bound (no troupe.dev/gpus) holds its CPU with its GPU.
  w.pod(podJson("other", 1, "n1", "", "Running"));
  CHECK(w.unknown("uid-other") == 1);
  CHECK(cpuOf("uid-other") == 1000);
  // A CPU-only pod another scheduler bound to the GPU node: 40 CPUs and 1Gi held there.
  w.pod(cpuOnly("web", "n1", "40"));
  REQUIRE(w.scheduler.allocationOf("uid-web"));
  CHECK(w.scheduler.allocationOf("uid-web")->gpus.empty());
  CHECK(cpuOf("uid-web") == 40000);
  CHECK(w.freeOn("n1") == 7);  // no GPU taken
  // 64 - 1 - 40 = 23 CPUs left: the 20-CPU pod still fits; at 45 CPUs it does not.
  CHECK(w.scheduler.filter(big, {"n1"}).passed.size() == 1);
  w.pod(cpuOnly("web", "n1", "45"));  // resized in place
  CHECK(cpuOf("uid-web") == 45000);
  auto refused = w.scheduler.filter(big, {"n1"});
  CHECK(refused.passed.empty());
  CHECK(w.sync.stats().gpu_pods == 1);
  CHECK(w.sync.stats().cpu_pods == 1);
  CHECK(w.scheduler.summary().pods == 1);  // troupe_gpu_pods: pods holding GPUs only
  // Seen again: nothing changes.
  w.pod(cpuOnly("web", "n1", "45"));
  CHECK(cpuOf("uid-web") == 45000);
  CHECK(w.sync.stats().cpu_pods == 1);

  // On a node without GPUs, or not bound yet, a CPU-only pod is not kept.
  w.pod(cpuOnly("elsewhere", "cpu-node", "8"));
  w.pod(cpuOnly("pending", "", "8"));
  CHECK_FALSE(w.scheduler.allocationOf("uid-elsewhere"));
  CHECK_FALSE(w.scheduler.allocationOf("uid-pending"));
  CHECK(w.sync.stats().cpu_pods == 1);

  // Finished: its CPU is free again, and the big pod fits.
  json done = cpuOnly("web", "n1", "45");
  done["status"]["phase"] = "Succeeded";
  w.pod(done);
  CHECK_FALSE(w.scheduler.allocationOf("uid-web"));
  CHECK(w.scheduler.filter(big, {"n1"}).passed.size() == 1);
  CHECK(w.sync.stats().cpu_pods == 0);

  // Deleted, and gone from a relist: released too.
  w.pod(cpuOnly("api", "n1", "30"));
  CHECK(cpuOf("uid-api") == 30000);
  w.pod(cpuOnly("api", "n1", "30"), WatchEventType::kDeleted);
  CHECK_FALSE(w.scheduler.allocationOf("uid-api"));
  w.pod(cpuOnly("batch", "n1", "30"));
  CHECK(cpuOf("uid-batch") == 30000);
  w.sync.podHandler().beginList();
  w.sync.podHandler().listed(toKube(podJson("other", 1, "n1", "", "Running")));
  w.sync.podHandler().endList();
  CHECK_FALSE(w.scheduler.allocationOf("uid-batch"));
  CHECK(cpuOf("uid-other") == 1000);
}

TEST_CASE("kube sync: the echo of Troupe's own CPU-only binding keeps its reservation", "[kube][sync][cpu]") {
  World w;
  w.node(nodeJson("n1", 8));
  troupe::sched::PodFacts web = troupe::testing::gpuPod("web", 0);
  web.uid = "uid-web";
  web.containers[0].requests["cpu"] = "10";
  REQUIRE(w.scheduler.filter(web, {"n1"}).passed.size() == 1);
  REQUIRE(w.scheduler.reserve(web.uid, "default", "web", "n1").isOk());
  REQUIRE(w.scheduler.allocationOf("uid-web"));
  CHECK(w.scheduler.allocationOf("uid-web")->cpu_milli == 10000);
  json echo = podJson("web", 0, "n1", "", "Running");
  echo["spec"]["containers"][0]["resources"] = {{"requests", {{"cpu", "10"}}}};
  w.pod(echo);
  w.pod(echo);
  REQUIRE(w.scheduler.allocationOf("uid-web"));
  CHECK(w.scheduler.allocationOf("uid-web")->cpu_milli == 10000);
  CHECK(w.sync.stats().cpu_pods == 1);
  CHECK(w.sync.stats().orphan_pods == 0);
}

TEST_CASE("kube sync: a restarted Troupe reads the CPU of the pods already bound", "[kube][sync][cpu]") {
  // The same pods, listed by a fresh Troupe: the node's CPU left is what the pods left, so
  // fragmentation and the balance term score the node as the Troupe that bound them did.
  World w;
  w.sync.nodeHandler().beginList();
  w.sync.nodeHandler().listed(toKube(nodeJson("n1", 8)));
  w.sync.nodeHandler().endList();
  json gpu = podJson("trainer", 4, "n1", "0,1,2,3", "Running");
  gpu["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "32";
  json web = podJson("web", 0, "n1", "", "Running");
  web["spec"]["containers"][0]["resources"] = {{"requests", {{"cpu", "16"}}}};
  w.sync.podHandler().beginList();
  w.sync.podHandler().listed(toKube(gpu));
  w.sync.podHandler().listed(toKube(web));
  w.sync.podHandler().endList();
  CHECK(w.scheduler.allocationOf("uid-trainer")->cpu_milli == 32000);
  CHECK(w.scheduler.allocationOf("uid-web")->cpu_milli == 16000);
  // 64 - 48 = 16 CPUs left: a 4-GPU pod asking 17 does not fit, one asking 16 does.
  troupe::sched::PodFacts next = troupe::testing::gpuPod("next", 4);
  next.uid = "uid-next";
  next.containers[0].requests["cpu"] = "17";
  CHECK(w.scheduler.filter(next, {"n1"}).passed.empty());
  next.containers[0].requests["cpu"] = "16";
  next.uid = "uid-next-2";
  CHECK(w.scheduler.filter(next, {"n1"}).passed.size() == 1);
}

TEST_CASE("kube pods: CPU and memory are read even when the GPU annotations are not", "[kube][sync][cpu]") {
  json p = podJson("p", 1, "n1", "", "Running");
  p["spec"]["containers"][0]["resources"]["requests"]["memory"] = "2Gi";
  p["metadata"]["annotations"] = {{"troupe.dev/gpu-topology", "sideways"}};
  auto view = decodePod(toKube(p));
  REQUIRE(view.isOk());
  CHECK(view.value().gpus == 1);
  CHECK(view.value().cpu_milli == 1000);
  CHECK(view.value().memory_bytes == 2LL << 30);
  CHECK(view.value().holdsResources());
  json idle = podJson("idle", 0, "n1", "", "Running");
  auto bare = decodePod(toKube(idle));
  REQUIRE(bare.isOk());
  CHECK_FALSE(bare.value().holdsResources());  // nothing requested: nothing to count
}
