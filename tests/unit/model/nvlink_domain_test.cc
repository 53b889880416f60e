// Multi-node NVLink domains as a topology level: nvidia.com/gpu.clique (GPU Operator) and
// Topograph's accelerator label, named by the alias nvlink-domain; the topology presets.
#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <set>

#include "support/fixtures.h"
#include "troupe/model/topology_levels.h"
#include "troupe/model/topology_presets.h"
#include "troupe/sched/gang/gang.h"
#include "troupe/sched/scheduler/scheduler.h"

using namespace troupe;
using namespace troupe::sched;
using troupe::testing::gpuNode;
using troupe::testing::gpuPod;

namespace {

constexpr int kNodesPerRack = 18;  // a GB200 NVL72 rack: 18 compute trays of 4 GPUs

std::vector<std::string> presetLevels(const std::string& name) {
  const model::TopologyPreset* p = model::findTopologyPreset(name);
  REQUIRE(p);
  return p->levels;
}

std::string nodeName(int rack, int i) { return "r" + std::to_string(rack) + "-n" + std::to_string(i); }

// `racks` NVL72 racks labelled as the GPU Operator and Troupe's rack label do, with
// used[node] GPUs taken by other pods. Returns the node names.
std::vector<std::string> addRacks(Scheduler& s, int racks, const std::map<std::string, int>& used = {},
                                  const std::string& clique_key = model::kGpuCliqueLabel) {
  std::vector<std::string> names;
  for (int r = 0; r < racks; ++r) {
    for (int i = 0; i < kNodesPerRack; ++i) {
      model::NodeFacts f = gpuNode(nodeName(r, i), 4, "NVIDIA-GB200");
      f.labels["troupe.dev/rack"] = "rack-" + std::to_string(r);
      f.labels[clique_key] = "7f3a9c1e-0b2d-4e5f-9a8b-1c2d3e4f5a6b." + std::to_string(r);
      REQUIRE(s.upsertNode(f).isOk());
      names.push_back(f.name);
      auto it = used.find(f.name);
      if (it == used.end() || it->second == 0) continue;
      model::Allocation a;
      a.pod_uid = "other-" + f.name;
      a.pod_key = "default/other-" + f.name;
      a.node = f.name;
      for (int g = 0; g < it->second; ++g) a.gpus.push_back(g);
      REQUIRE(s.recordAllocation(a).isOk());
    }
  }
  return names;
}

PodFacts member(const std::string& gang, int index, int size, const std::string& level) {
  return gpuPod(gang + "-" + std::to_string(index), 4,
                {{kGangName, gang}, {kGangSize, std::to_string(size)}, {kAnnotationTopologyRequired, level}});
}

SchedulerConfig withLevels(std::vector<std::string> levels) {
  SchedulerConfig c;
  c.topology_levels = std::move(levels);
  return c;
}

std::string rackOf(const std::string& node) { return node.substr(0, node.find('-')); }

}  // namespace

TEST_CASE("nvlink-domain: the alias and the level's other names", "[topology-levels][nvlink]") {
  const std::vector<std::string> nvl72 = presetLevels("nvidia-nvl72");
  REQUIRE(nvl72.back() == model::kGpuCliqueLabel);
  for (const char* name :
       {"nvlink-domain", "NVLink-Domain", " nvlink-domain ", "gpu.clique", "nvidia.com/gpu.clique"}) {
    INFO(name);
    CHECK(model::findTopologyLevel(nvl72, name) == 3);
  }
  const std::vector<std::string> topograph = presetLevels("nvidia-topograph");
  CHECK(model::findTopologyLevel(topograph, "nvlink-domain") == 3);
  CHECK(model::findTopologyLevel(topograph, "accelerator") == 3);
  CHECK(model::findTopologyLevel(topograph, "leaf") == 2);
  CHECK(model::findTopologyLevel(topograph, "core") == 0);
  CHECK(model::findTopologyLevel(model::defaultTopologyLevels(), "nvlink-domain") == -1);
  CHECK(model::levelDisplayName(model::kGpuCliqueLabel) == "nvlink-domain");
  CHECK(model::levelDisplayName("troupe.dev/rack") == "rack");
  CHECK_THAT(model::describeTopologyLevels(nvl72), Catch::EndsWith("nvlink-domain (nvidia.com/gpu.clique)"));

  // Two levels the alias would name, or a short name that is the alias of another level.
  auto errors = model::validateTopologyLevels({model::kTopographAcceleratorLabel, model::kGpuCliqueLabel});
  REQUIRE(errors.size() == 1);
  CHECK_THAT(errors[0], Catch::Contains("are both the nvlink-domain level"));
  errors = model::validateTopologyLevels({"example.com/nvlink-domain", model::kGpuCliqueLabel});
  REQUIRE(errors.size() == 1);
  CHECK_THAT(errors[0], Catch::Contains("both answer to \"nvlink-domain\""));
  errors = model::validateTopologyLevels({model::kGpuCliqueLabel, "example.com/NVLink-Domain"});
  REQUIRE(errors.size() == 1);
  CHECK_THAT(errors[0], Catch::Contains("both answer to \"NVLink-Domain\""));
  // A level named nvlink-domain with no aliased level beside it is just a level.
  CHECK(model::validateTopologyLevels({"example.com/nvlink-domain", "troupe.dev/rack"}).empty());
  CHECK(model::findTopologyLevel({"example.com/nvlink-domain"}, "nvlink-domain") == 0);

  // The pod annotation takes the alias; unknown names list it.
  Result<GpuRequest> req = parseGpuRequest(member("g", 0, 2, "nvlink-domain"), nvl72);
  REQUIRE(req.isOk());
  CHECK(req.value().topology_required == 3);
  req = parseGpuRequest(member("g", 0, 2, "nvlink"), nvl72);
  REQUIRE_FALSE(req.isOk());
  CHECK_THAT(req.status().message(), Catch::Contains("nvlink-domain (nvidia.com/gpu.clique)"));
}

TEST_CASE("presets: every preset is a valid list of levels, widest first", "[topology-levels][preset]") {
  std::set<std::string> names;
  for (const model::TopologyPreset& p : model::topologyPresets()) {
    INFO(p.name);
    CHECK(model::validateTopologyLevels(p.levels).empty());
    CHECK(p.levels.size() >= 3);
    CHECK(names.insert(p.name).second);
    CHECK(model::findTopologyPreset(p.name) == &p);
  }
  CHECK(presetLevels("default") == model::defaultTopologyLevels());
  CHECK(presetLevels("gke").front() == "cloud.google.com/gce-topology-block");
  CHECK(presetLevels("gke").back() == "cloud.google.com/gce-topology-host");
  CHECK(presetLevels("aws").front() == "topology.k8s.aws/network-node-layer-1");
  CHECK(presetLevels("nvidia-topograph").front() == "network.topology.nvidia.com/core");
  CHECK(model::findTopologyPreset("Default") == nullptr);
  CHECK(model::findTopologyPreset("nvl72") == nullptr);
  CHECK(model::topologyPresetNames() == "default, nvidia-nvl72, nvidia-topograph, gke, aws");
}

TEST_CASE("nvlink-domain: a 16-member gang lands inside one NVL72 rack", "[gang][topology][nvlink]") {
  Scheduler s(withLevels(presetLevels("nvidia-nvl72")));
  // Rack 0 has 15 whole nodes free (three half used), rack 1 all 18: the gang needs 16 whole
  // nodes, so only rack 1 holds it, even though rack 0 has more GPUs free than 64.
  std::vector<std::string> nodes = addRacks(s, 2, {{"r0-n0", 2}, {"r0-n1", 2}, {"r0-n2", 2}});
  std::set<std::string> racks;
  for (int i = 0; i < 16; ++i) {
    FilterResult r = s.filter(member("train", i, 16, "nvlink-domain"), nodes);
    REQUIRE(r.passed.size() == 1);
    racks.insert(rackOf(r.passed.front()));
  }
  CHECK(racks == std::set<std::string>{"r1"});
  CHECK(s.summary().gangs.held_gpus == 64);
}

TEST_CASE("nvlink-domain: a gang bigger than any domain is refused, naming the level and its GPUs",
          "[gang][topology][nvlink]") {
  Scheduler s(withLevels(presetLevels("nvidia-nvl72")));
  std::vector<std::string> nodes = addRacks(s, 2);
  FilterResult r = s.filter(member("huge", 0, 20, "nvlink-domain"), nodes);
  CHECK(r.passed.empty());
  REQUIRE(r.unresolvable.size() == nodes.size());
  const std::string& reason = r.unresolvable.begin()->second;
  CHECK_THAT(reason, Catch::Contains("needs 20 pods of 4 GPUs in one nvlink-domain "
                                     "(troupe.dev/topology-required=nvlink-domain)"));
  CHECK_THAT(reason, Catch::Contains("the largest nvlink-domain can hold only 18 even when empty"));
  CHECK_THAT(reason, Catch::Contains(": 72 matching GPUs)"));
  CHECK(s.summary().gangs.held_gpus == 0);

  SECTION("one that fits later waits, with the best domain's free GPUs") {
    Scheduler busy(withLevels(presetLevels("nvidia-nvl72")));
    std::map<std::string, int> used;
    for (int i = 0; i < 6; ++i) used[nodeName(0, i)] = 1;
    for (int i = 0; i < 8; ++i) used[nodeName(1, i)] = 4;
    nodes = addRacks(busy, 2, used);
    r = busy.filter(member("wait", 0, 16, "gpu.clique"), nodes);
    CHECK(r.passed.empty());
    CHECK(r.unresolvable.empty());
    REQUIRE_FALSE(r.failed.empty());
    // Rack 0: 12 whole nodes free, 6 with 3 GPUs left: 66 GPUs free, room for 12 members.
    CHECK_THAT(
        r.failed.begin()->second,
        Catch::Contains("waits for capacity in one nvlink-domain (troupe.dev/topology-required="
                        "nvlink-domain): the best nvlink-domain, 7f3a9c1e-0b2d-4e5f-9a8b-1c2d3e4f5a6b.0, "
                        "holds 12 of 16 members now (66 GPUs free), 16 more GPUs must free up there"));
  }
}

TEST_CASE("nvlink-domain: random fleets, a required domain is all or nothing", "[gang][topology][nvlink]") {
  std::mt19937 rng(20261202);
  for (int round = 0; round < 60; ++round) {
    const bool topograph = round % 2 == 1;
    Scheduler s(withLevels(presetLevels(topograph ? "nvidia-topograph" : "nvidia-nvl72")));
    std::map<std::string, int> used;
    std::map<std::string, int> whole_free;  // per rack: nodes with all 4 GPUs free
    const int racks = 1 + static_cast<int>(rng() % 3);
    for (int r = 0; r < racks; ++r) {
      for (int i = 0; i < kNodesPerRack; ++i) {
        const int u = rng() % 3 == 0 ? static_cast<int>(rng() % 5) : 0;
        used[nodeName(r, i)] = u;
        if (u == 0) ++whole_free["r" + std::to_string(r)];
      }
    }
    std::vector<std::string> nodes =
        addRacks(s, racks, used, topograph ? model::kTopographAcceleratorLabel : model::kGpuCliqueLabel);
    const int size = 1 + static_cast<int>(rng() % 20);
    int most = 0;
    for (const auto& [rack, n] : whole_free) most = std::max(most, n);
    std::set<std::string> landed;
    int passed = 0;
    for (int i = 0; i < size; ++i) {
      FilterResult r = s.filter(member("g" + std::to_string(round), i, size, "nvlink-domain"), nodes);
      if (r.passed.size() == 1) {
        ++passed;
        landed.insert(rackOf(r.passed.front()));
      }
    }
    INFO("round " << round << " size " << size << " most free nodes in a domain " << most);
    if (size <= most) {
      CHECK(passed == size);
      CHECK(landed.size() == 1);
      CHECK(whole_free[*landed.begin()] >= size);
    } else {
      CHECK(passed == 0);
      CHECK(s.summary().gangs.held_gpus == 0);
    }
  }
}
