// Network topology levels: names, validation, the config key topology.levels and the pod
// annotations that name a level.
#include "troupe/model/topology_levels.h"

#include <catch2/catch.hpp>

#include "adapters/yaml/config.h"
#include "support/fixtures.h"
#include "troupe/model/topology_presets.h"
#include "troupe/sched/request/pod_request.h"

using namespace troupe;
using troupe::testing::gpuPod;

TEST_CASE("topology levels: short names, lookup and validation", "[topology-levels]") {
  const std::vector<std::string>& levels = model::defaultTopologyLevels();
  CHECK(levels ==
        std::vector<std::string>{"topology.kubernetes.io/zone", "troupe.dev/block", "troupe.dev/rack"});
  CHECK(model::levelShortName("troupe.dev/rack") == "rack");
  CHECK(model::levelShortName("rack") == "rack");
  CHECK(model::findTopologyLevel(levels, "rack") == 2);
  CHECK(model::findTopologyLevel(levels, " Block ") == 1);
  CHECK(model::findTopologyLevel(levels, "topology.kubernetes.io/zone") == 0);
  CHECK(model::findTopologyLevel(levels, "troupe.dev/zone") == -1);  // a full key must match exactly
  CHECK(model::findTopologyLevel(levels, "shelf") == -1);
  CHECK(model::validateTopologyLevels(levels).empty());
  CHECK(model::validateTopologyLevels({}).empty());

  auto errors = model::validateTopologyLevels({"troupe.dev/rack", "example.com/rack"});
  REQUIRE(errors.size() == 1);
  CHECK_THAT(errors[0],
             Catch::Contains("levels[1] \"example.com/rack\" has the short name \"rack\" of levels[0]"));
  errors = model::validateTopologyLevels({"troupe.dev/rack", "troupe.dev/rack"});
  REQUIRE(errors.size() == 1);
  CHECK_THAT(errors[0], Catch::Contains("is listed twice"));
  for (const char* bad : {"", "troupe.dev/", "/rack", "rack!", "-rack", "a b/rack"}) {
    INFO(bad);
    CHECK(model::validateTopologyLevels({bad}).size() == 1);
  }

  const std::map<std::string, std::string> labels{{"troupe.dev/rack", "r7"}, {"troupe.dev/block", "b2"}};
  CHECK(model::topologyDomains(labels, levels) == std::vector<std::string>{"", "b2", "r7"});
}

TEST_CASE("topology levels: config key topology.levels", "[topology-levels][config]") {
  auto c = config::parseServeConfig("listen: 127.0.0.1:1\n", "t.yaml");
  REQUIRE(c.isOk());
  CHECK(c.value().topology_levels == model::defaultTopologyLevels());

  c = config::parseServeConfig("topology:\n  levels: [example.com/hall, troupe.dev/rack]\n", "t.yaml");
  REQUIRE(c.isOk());
  CHECK(c.value().topology_levels == std::vector<std::string>{"example.com/hall", "troupe.dev/rack"});

  c = config::parseServeConfig("topology:\n  levels: []\n", "t.yaml");
  REQUIRE(c.isOk());
  CHECK(c.value().topology_levels.empty());

  c = config::parseServeConfig("topology:\n  levels:\n    - troupe.dev/rack\n    - other.io/rack\n",
                               "t.yaml");
  REQUIRE_FALSE(c.isOk());
  CHECK_THAT(c.status().message(),
             Catch::StartsWith("t.yaml:4: topology.levels[1]: levels[1] \"other.io/rack\""));

  c = config::parseServeConfig("topology:\n  levels: troupe.dev/rack\n", "t.yaml");
  REQUIRE_FALSE(c.isOk());
  CHECK_THAT(c.status().message(),
             Catch::StartsWith("t.yaml:2: topology.levels: must be a list of node label keys"));

  c = config::parseServeConfig("topology:\n  level: [troupe.dev/rack]\n", "t.yaml");
  REQUIRE_FALSE(c.isOk());
  CHECK_THAT(c.status().message(),
             Catch::StartsWith("t.yaml:2: topology.level: unknown key; expected one of levels"));

  c = config::parseServeConfig("topology:\n  levels: [{a: b}]\n", "t.yaml");
  REQUIRE_FALSE(c.isOk());
  CHECK_THAT(c.status().message(),
             Catch::StartsWith("t.yaml:2: topology.levels[0]: must be a node label key"));
}

TEST_CASE("topology levels: config key topology.preset", "[topology-levels][config][preset]") {
  auto c = config::parseServeConfig("topology:\n  preset: nvidia-nvl72\n", "t.yaml");
  REQUIRE(c.isOk());
  CHECK(c.value().topology_preset == "nvidia-nvl72");
  CHECK(c.value().topology_levels == std::vector<std::string>{"topology.kubernetes.io/zone",
                                                              "troupe.dev/block", "troupe.dev/rack",
                                                              "nvidia.com/gpu.clique"});
  for (const char* name : {"gke", "aws", "nvidia-topograph", "default"}) {
    INFO(name);
    c = config::parseServeConfig(std::string("topology: {preset: ") + name + "}\n", "t.yaml");
    REQUIRE(c.isOk());
    CHECK(c.value().topology_levels == model::findTopologyPreset(name)->levels);
  }
  // Explicit levels win over the preset, whichever comes first in the file.
  for (const char* yaml : {"topology: {preset: aws, levels: [troupe.dev/rack]}\n",
                           "topology: {levels: [troupe.dev/rack], preset: aws}\n"}) {
    INFO(yaml);
    c = config::parseServeConfig(yaml, "t.yaml");
    REQUIRE(c.isOk());
    CHECK(c.value().topology_levels == std::vector<std::string>{"troupe.dev/rack"});
  }
  c = config::parseServeConfig("topology:\n  preset: nvl72\n", "t.yaml");
  REQUIRE_FALSE(c.isOk());
  CHECK(c.status().message() ==
        "t.yaml:2: topology.preset: unknown preset \"nvl72\"; expected one of default, nvidia-nvl72, "
        "nvidia-topograph, gke, aws (or list topology.levels yourself)");
  c = config::parseServeConfig("topology:\n  preset: [gke]\n", "t.yaml");
  REQUIRE_FALSE(c.isOk());
  CHECK_THAT(c.status().message(), Catch::StartsWith("t.yaml:2: topology.preset: must be a preset name"));
  c = config::parseServeConfig(
      "topology:\n  levels: [nvidia.com/gpu.clique, network.topology.nvidia.com/accelerator]\n", "t.yaml");
  REQUIRE_FALSE(c.isOk());
  CHECK_THAT(c.status().message(), Catch::Contains("are both the nvlink-domain level"));
}

TEST_CASE("topology levels: the pod annotations that name a level", "[topology-levels][pod]") {
  using sched::kAnnotationTopologyPreferred;
  using sched::kAnnotationTopologyRequired;
  auto r = sched::parseGpuRequest(gpuPod("p", 8));
  REQUIRE(r.isOk());
  CHECK(r.value().topology_required == -1);
  CHECK(r.value().topology_preferred == -1);

  r = sched::parseGpuRequest(gpuPod(
      "p", 8, {{kAnnotationTopologyRequired, "RACK"}, {kAnnotationTopologyPreferred, "troupe.dev/rack"}}));
  REQUIRE(r.isOk());
  CHECK(r.value().topology_required == 2);
  CHECK(r.value().topology_preferred == 2);

  r = sched::parseGpuRequest(gpuPod("p", 8, {{kAnnotationTopologyPreferred, "hall"}}),
                             {"example.com/hall", "troupe.dev/rack"});
  REQUIRE(r.isOk());
  CHECK(r.value().topology_preferred == 0);

  r = sched::parseGpuRequest(gpuPod("p", 8, {{kAnnotationTopologyPreferred, "shelf"}}));
  REQUIRE_FALSE(r.isOk());
  CHECK(r.status().message() ==
        "annotation troupe.dev/topology-preferred=\"shelf\" is invalid: expected one of the configured "
        "topology "
        "levels, by short name or label key: zone (topology.kubernetes.io/zone), block (troupe.dev/block), "
        "rack "
        "(troupe.dev/rack)");

  r = sched::parseGpuRequest(
      gpuPod("p", 8, {{kAnnotationTopologyRequired, "rack"}, {kAnnotationTopologyPreferred, "zone"}}));
  REQUIRE_FALSE(r.isOk());
  CHECK_THAT(
      r.status().message(),
      Catch::StartsWith("annotation troupe.dev/topology-preferred=\"zone\" is invalid: it is wider than "
                        "troupe.dev/topology-required=\"rack\""));

  r = sched::parseGpuRequest(gpuPod("p", 8, {{kAnnotationTopologyRequired, "rack"}}), {});
  REQUIRE_FALSE(r.isOk());
  CHECK_THAT(r.status().message(), Catch::Contains("Troupe has no network topology levels configured"));
}
