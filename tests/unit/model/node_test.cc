// Nodes: facts -> NodeInfo (nodeFromFacts) and the allocation ledger (NodeState).
#include "troupe/model/node.h"

#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "support/fixtures.h"

namespace {

using troupe::Code;
using troupe::Status;
using troupe::model::Allocation;
using troupe::model::NodeFacts;
using troupe::model::NodeInfo;
using troupe::model::NodeState;
using troupe::model::TopologyCatalog;
using troupe::testing::gpuNode;

NodeInfo mustInfo(const NodeFacts& f, TopologyCatalog& catalog) {
  auto r = troupe::model::nodeFromFacts(f, catalog);
  INFO(r.status().message());
  REQUIRE(r.isOk());
  return r.value();
}

Allocation alloc(const std::string& uid, std::vector<int> gpus, int64_t milli = 1000, int unknown = 0) {
  Allocation a;
  a.pod_uid = uid;
  a.pod_key = "ns/" + uid;
  a.node = "n";
  a.gpus = std::move(gpus);
  a.milli_per_gpu = milli;
  a.unknown_gpus = unknown;
  return a;
}

NodeState h100State(int gpus = 8) {
  TopologyCatalog catalog;
  return NodeState(mustInfo(gpuNode("n", gpus), catalog));
}

const char* kDgx1Matrix =
    R"([["X","NV1","NV1","NV2","NV2","SYS","SYS","SYS"],
        ["NV1","X","NV2","NV1","SYS","NV2","SYS","SYS"],
        ["NV1","NV2","X","NV2","SYS","SYS","NV1","SYS"],
        ["NV2","NV1","NV2","X","SYS","SYS","SYS","NV1"],
        ["NV2","SYS","SYS","SYS","X","NV1","NV1","NV2"],
        ["SYS","NV2","SYS","SYS","NV1","X","NV2","NV1"],
        ["SYS","SYS","NV1","SYS","NV1","NV2","X","NV2"],
        ["SYS","SYS","SYS","NV1","NV2","NV1","NV2","X"]])";

}  // namespace

TEST_CASE("node facts: GPU count, product, memory and profile", "[node]") {
  TopologyCatalog catalog;
  SECTION("the fixture node: 8 H100, hgx-h100-8") {
    NodeInfo info = mustInfo(gpuNode("a1", 8), catalog);
    CHECK(info.name == "a1");
    CHECK(info.gpu_count == 8);
    CHECK(info.gpu_product == "NVIDIA-H100-80GB-HBM3");
    CHECK(info.gpu_memory_mib == 81559);
    REQUIRE(info.topology);
    CHECK(info.topology->profile() == "hgx-h100-8");
    CHECK(info.topology->size() == 8);
    CHECK(info.labels.at("nvidia.com/gpu.count") == "8");
  }
  SECTION("allocatable wins over the gpu.count label") {
    NodeFacts f = gpuNode("a1", 8);
    f.allocatable_gpus = "4";
    NodeInfo info = mustInfo(f, catalog);
    CHECK(info.gpu_count == 4);
    CHECK(info.topology->profile() == "pcie-4");
  }
  SECTION("the label stands in when allocatable is absent") {
    NodeFacts f = gpuNode("a1", 8);
    f.allocatable_gpus = "";
    f.labels["nvidia.com/gpu.count"] = "2";
    CHECK(mustInfo(f, catalog).gpu_count == 2);
  }
  SECTION("no GPUs at all") {
    NodeFacts f;
    f.name = "cpu-only";
    NodeInfo info = mustInfo(f, catalog);
    CHECK(info.gpu_count == 0);
    CHECK(info.gpu_product.empty());
    REQUIRE(info.topology);
    CHECK(info.topology->size() == 0);
  }
  SECTION("other products get their profiles") {
    CHECK(mustInfo(gpuNode("b1", 8, "NVIDIA-A100-SXM4-80GB", 81920), catalog).topology->profile() ==
          "hgx-a100-8");
    CHECK(mustInfo(gpuNode("v", 8, "Tesla-V100-SXM2-16GB", 16384), catalog).topology->profile() ==
          "dgx1-v100-8");
    CHECK(mustInfo(gpuNode("l", 8, "NVIDIA-L40S", 46068), catalog).topology->profile() == "pcie-8");
  }
  SECTION("cpu, memory and pods quantities") {
    NodeFacts f = gpuNode("a1", 8);
    f.cpu = "191450m";
    f.memory = "2100825308Ki";
    f.pods = "110";
    f.unschedulable = true;
    NodeInfo info = mustInfo(f, catalog);
    CHECK(info.cpu_milli == 191450);
    CHECK(info.memory_bytes == 2100825308LL * 1024);
    CHECK(info.max_pods == 110);
    CHECK(info.unschedulable);
  }
  SECTION("nodes of one kind share one topology") {
    NodeInfo a = mustInfo(gpuNode("a1", 8), catalog);
    NodeInfo b = mustInfo(gpuNode("a2", 8), catalog);
    CHECK(a.topology.get() == b.topology.get());
    NodeInfo c = mustInfo(gpuNode("b1", 8, "NVIDIA-A100-SXM4-80GB"), catalog);
    CHECK(a.topology.get() != c.topology.get());
  }
}

TEST_CASE("node facts: the topology-profile label and the gpu-topology annotation", "[node]") {
  TopologyCatalog catalog;
  SECTION("label picks the profile") {
    NodeFacts f = gpuNode("p", 8);
    f.labels["troupe.dev/topology-profile"] = "pcie-nvbridge-8";
    CHECK(mustInfo(f, catalog).topology->profile() == "pcie-nvbridge-8");
  }
  SECTION("annotation wins over label and product") {
    NodeFacts f = gpuNode("m", 8, "NVIDIA-H100-80GB-HBM3");
    f.labels["troupe.dev/topology-profile"] = "pcie-8";
    f.annotations["troupe.dev/gpu-topology"] = kDgx1Matrix;
    NodeInfo info = mustInfo(f, catalog);
    CHECK(info.topology->profile() == "annotation");
    CHECK(info.topology->link(0, 3).nvlinks == 2);
    CHECK(info.topology->link(0, 1).nvlinks == 1);
    CHECK_FALSE(info.topology->nvlinked(0, 5));
    CHECK(info.topology->nvlinkDomains().size() == 1);
  }
  SECTION("errors name the label or annotation and the value") {
    struct Bad {
      const char* what;
      NodeFacts facts;
      std::vector<std::string> fragments;
    };
    std::vector<Bad> cases;
    {
      NodeFacts f = gpuNode("n1", 8);
      f.allocatable_gpus = "";
      f.labels["nvidia.com/gpu.count"] = "eight";
      cases.push_back({"bad gpu.count", f, {"n1", "nvidia.com/gpu.count", "eight"}});
    }
    {
      NodeFacts f = gpuNode("n2", 8);
      f.allocatable_gpus = "";
      f.labels["nvidia.com/gpu.count"] = "65";
      cases.push_back({"gpu.count too large", f, {"nvidia.com/gpu.count", "65"}});
    }
    {
      NodeFacts f = gpuNode("n3", 8);
      f.allocatable_gpus = "lots";
      cases.push_back({"bad allocatable", f, {"nvidia.com/gpu", "lots"}});
    }
    {
      NodeFacts f = gpuNode("n3b", 8);
      f.allocatable_gpus = "-2";
      cases.push_back({"negative allocatable", f, {"nvidia.com/gpu", "-2"}});
    }
    {
      NodeFacts f = gpuNode("n4", 8);
      f.labels["nvidia.com/gpu.memory"] = "80 GB";
      cases.push_back({"bad gpu.memory", f, {"nvidia.com/gpu.memory", "80 GB"}});
    }
    {
      NodeFacts f = gpuNode("n5", 8);
      f.labels["troupe.dev/topology-profile"] = "warp-drive";
      cases.push_back({"unknown profile", f, {"troupe.dev/topology-profile", "warp-drive"}});
    }
    {
      NodeFacts f = gpuNode("n6", 4);
      f.labels["troupe.dev/topology-profile"] = "hgx-h100-8";
      cases.push_back({"profile of the wrong size", f, {"troupe.dev/topology-profile", "hgx-h100-8"}});
    }
    {
      NodeFacts f = gpuNode("n7", 4);
      f.annotations["troupe.dev/gpu-topology"] = R"([["X","NV2"],["NV2","X"]])";
      cases.push_back(
          {"matrix size differs from GPU count", f, {"troupe.dev/gpu-topology", "2 rows", "4 GPUs"}});
    }
    {
      NodeFacts f = gpuNode("n8", 2);
      f.annotations["troupe.dev/gpu-topology"] = "not json";
      cases.push_back({"matrix text unreadable", f, {"troupe.dev/gpu-topology"}});
    }
    {
      NodeFacts f = gpuNode("n9", 2);
      f.annotations["troupe.dev/gpu-topology"] = R"([["X","WARP"],["WARP","X"]])";
      cases.push_back({"matrix cell unknown", f, {"troupe.dev/gpu-topology", "WARP"}});
    }
    {
      NodeFacts f = gpuNode("n10", 8);
      f.cpu = "many";
      cases.push_back({"bad cpu", f, {"cpu", "many"}});
    }
    {
      NodeFacts f = gpuNode("", 8);
      cases.push_back({"no name", f, {"metadata.name"}});
    }
    for (const Bad& c : cases) {
      INFO(c.what);
      auto r = troupe::model::nodeFromFacts(c.facts, catalog);
      REQUIRE_FALSE(r.isOk());
      CHECK(r.status().code() == Code::kInvalidArgument);
      for (const std::string& frag : c.fragments) CHECK_THAT(r.status().message(), Catch::Contains(frag));
      if (!c.facts.name.empty()) CHECK_THAT(r.status().message(), Catch::Contains(c.facts.name));
    }
  }
}

TEST_CASE("node state: add, remove, overlap refusal", "[node]") {
  NodeState s = h100State();
  CHECK(s.gpuCount() == 8);
  CHECK(s.fullyFreeMask() == 0xFFu);
  CHECK(s.wholeFreeCount() == 8);

  REQUIRE(s.add(alloc("a", {0, 1})).isOk());
  CHECK(s.fullyFreeMask() == 0xFCu);
  CHECK(s.wholeFreeCount() == 6);
  CHECK(s.usedMilliTotal() == 2000);
  CHECK(s.podCount() == 1);
  REQUIRE(s.find("a"));
  CHECK(s.find("a")->gpus == std::vector<int>{0, 1});

  SECTION("overlap is refused and changes nothing") {
    Status st = s.add(alloc("b", {1, 2}));
    CHECK(st.code() == Code::kFailedPrecondition);
    CHECK_THAT(st.message(), Catch::Contains("GPU 1"));
    CHECK(s.fullyFreeMask() == 0xFCu);
    CHECK(s.find("b") == nullptr);
    CHECK(s.podCount() == 1);
  }
  SECTION("out-of-range and duplicate indices are invalid") {
    CHECK(s.add(alloc("b", {8})).code() == Code::kInvalidArgument);
    CHECK(s.add(alloc("b", {-1})).code() == Code::kInvalidArgument);
    CHECK(s.add(alloc("b", {3, 3})).code() == Code::kInvalidArgument);
    CHECK(s.fullyFreeMask() == 0xFCu);
    CHECK(s.podCount() == 1);
  }
  SECTION("the same pod twice is refused") {
    CHECK(s.add(alloc("a", {5})).code() == Code::kFailedPrecondition);
    CHECK(s.fullyFreeMask() == 0xFCu);
  }
  SECTION("a CPU-only pod counts as a pod, not as a GPU pod") {
    troupe::model::Allocation web = alloc("web", {});
    web.cpu_milli = 4000;
    REQUIRE(s.add(web).isOk());
    CHECK(s.podCount() == 2);
    CHECK(s.gpuPodCount() == 1);
    CHECK(s.cpuUsed() == 4000);
    troupe::model::Allocation unknown = alloc("theirs", {});
    unknown.unknown_gpus = 2;
    REQUIRE(s.add(unknown).isOk());
    CHECK(s.gpuPodCount() == 2);
    CHECK(s.remove("web"));
    CHECK(s.remove("theirs"));
    CHECK(s.gpuPodCount() == 1);
    CHECK(s.cpuUsed() == 0);
  }
  SECTION("remove frees the GPUs; a second remove is a no-op") {
    CHECK(s.remove("a"));
    CHECK(s.gpuPodCount() == 0);
    CHECK_FALSE(s.remove("a"));
    CHECK_FALSE(s.remove("never"));
    CHECK(s.fullyFreeMask() == 0xFFu);
    CHECK(s.usedMilliTotal() == 0);
    CHECK(s.podCount() == 0);
    CHECK(s.add(alloc("b", {1, 2})).isOk());
  }
}

TEST_CASE("node state: shared GPUs", "[node]") {
  NodeState s = h100State();
  REQUIRE(s.add(alloc("x", {2}, 500)).isOk());
  REQUIRE(s.add(alloc("y", {2}, 300)).isOk());
  CHECK(s.gpuUsedMilli(2) == 800);
  CHECK(s.gpuFreeMilli(2) == 200);
  CHECK(s.sharedGpuCount() == 1);
  CHECK(s.wholeFreeCount() == 7);
  CHECK(s.add(alloc("z", {2}, 300)).code() == Code::kFailedPrecondition);
  CHECK(s.add(alloc("z", {2}, 200)).isOk());
  CHECK(s.sharedGpuCount() == 0);  // full now
  CHECK(s.add(alloc("w", {2}, 1000)).code() == Code::kFailedPrecondition);
  CHECK(s.usedMilliTotal() == 1000);
  CHECK(s.remove("x"));
  CHECK(s.gpuUsedMilli(2) == 500);
}

TEST_CASE("node state: GPUs held at unknown indices", "[node]") {
  NodeState s = h100State();
  REQUIRE(s.add(alloc("ghost", {}, 1000, 3)).isOk());
  CHECK(s.unknownHeld() == 3);
  CHECK(s.fullyFreeMask() == 0xFFu);  // we do not know which
  CHECK(s.wholeFreeCount() == 5);
  CHECK(s.usedMilliTotal() == 3000);
  REQUIRE(s.add(alloc("known", {0, 1, 2, 3, 4, 5})).isOk());
  CHECK(s.wholeFreeCount() == 0);     // 2 fully free minus 3 unknown, clamped
  CHECK(s.usedMilliTotal() == 8000);  // never more than capacity
  CHECK(s.remove("ghost"));
  CHECK(s.unknownHeld() == 0);
  CHECK(s.wholeFreeCount() == 2);
}

TEST_CASE("node state: setInfo keeps allocations and shrinks safely", "[node]") {
  TopologyCatalog catalog;
  NodeState s(mustInfo(gpuNode("n", 8), catalog));
  REQUIRE(s.add(alloc("low", {0, 1})).isOk());
  REQUIRE(s.add(alloc("high", {5, 6})).isOk());
  REQUIRE(s.add(alloc("shared", {2}, 500)).isOk());

  SECTION("same shape: nothing changes") {
    s.setInfo(mustInfo(gpuNode("n", 8), catalog));
    CHECK(s.fullyFreeMask() == 0x98u);  // 3, 4, 7
    CHECK(s.gpuUsedMilli(2) == 500);
    CHECK(s.unknownHeld() == 0);
    CHECK(s.podCount() == 3);
  }
  SECTION("shrinking to 4 GPUs turns vanished GPUs into unknown holders") {
    s.setInfo(mustInfo(gpuNode("n", 4), catalog));
    CHECK(s.gpuCount() == 4);
    CHECK(s.topology().size() == 4);
    CHECK(s.podCount() == 3);
    REQUIRE(s.find("high"));
    CHECK(s.find("high")->gpus.empty());
    CHECK(s.find("high")->unknown_gpus == 2);
    CHECK(s.find("low")->gpus == std::vector<int>{0, 1});
    CHECK(s.unknownHeld() == 2);
    CHECK(s.fullyFreeMask() == 0x8u);  // only GPU 3
    CHECK(s.wholeFreeCount() == 0);    // 1 free minus 2 unknown, clamped
    CHECK(s.usedMilliTotal() == 4000);
    // Removing the displaced pod gives its GPUs back.
    CHECK(s.remove("high"));
    CHECK(s.unknownHeld() == 0);
    CHECK(s.wholeFreeCount() == 1);
    // And an allocation on a new index still works.
    CHECK(s.add(alloc("new", {3})).isOk());
    CHECK(s.add(alloc("bad", {4})).code() == Code::kInvalidArgument);
  }
  SECTION("growing back keeps unknown holders unknown") {
    s.setInfo(mustInfo(gpuNode("n", 4), catalog));
    s.setInfo(mustInfo(gpuNode("n", 8), catalog));
    CHECK(s.unknownHeld() == 2);
    CHECK(s.wholeFreeCount() == 5 - 2);  // free: 3,4,5,6,7
  }
}

TEST_CASE("node state: the kept free mask always matches the per-GPU ledger", "[node]") {
  // fullyFreeMask() is kept up to date instead of recomputed; a long mixed sequence of whole,
  // shared and failing adds, removes and reshapes must leave it equal to the recomputation.
  TopologyCatalog catalog;
  NodeState s(mustInfo(gpuNode("n", 8), catalog));
  auto recomputed = [&] {
    uint64_t mask = 0;
    for (int g = 0; g < s.gpuCount(); ++g) {
      if (s.gpuUsedMilli(g) == 0) mask |= uint64_t{1} << g;
    }
    return mask;
  };
  uint64_t state = 12345;
  auto next = [&](uint64_t n) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (state >> 33) % n;
  };
  std::vector<std::string> live;
  for (int step = 0; step < 3000; ++step) {
    INFO("step " << step);
    const uint64_t op = next(10);
    if (op < 5) {
      const std::string uid = "p" + std::to_string(step);
      std::vector<int> gpus;
      const int count = static_cast<int>(next(3)) + 1;
      for (int i = 0; i < count; ++i) gpus.push_back(static_cast<int>(next(9)));  // 8 is out of range
      const int64_t milli = next(2) ? 1000 : 250 * static_cast<int64_t>(next(4) + 1);
      if (s.add(alloc(uid, gpus, milli)).isOk()) live.push_back(uid);
    } else if (op < 9 && !live.empty()) {
      const size_t i = next(live.size());
      CHECK(s.remove(live[i]));
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    } else if (op == 9) {
      s.setInfo(mustInfo(gpuNode("n", next(2) ? 8 : 4), catalog));
    }
    REQUIRE(s.fullyFreeMask() == recomputed());
    CHECK(s.wholeFreeCount() == std::max(0, std::popcount(recomputed()) - s.unknownHeld()));
  }
}
