// parseServeConfig reads each section with its own parser: every section's keys land in their
// fields, and with errors in several sections the first section in the parsing order is the one
// reported (the order the file's readers have always seen).
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "adapters/yaml/config.h"

using troupe::config::parseServeConfig;

TEST_CASE("config sections: each section's keys land in their fields", "[config]") {
  auto c = parseServeConfig(R"(listen: 0.0.0.0:9
maxBodyBytes: 2048
logLevel: warn
policy: {name: troupe, weights: {pack: 0.7}}
filter: {narrowTo: best}
topology: {preset: gke}
gang: {timeout: 30s, maxTimeout: 1m, maxGangs: 7}
binder: {workers: 3}
schedulerNames: [a, b]
defrag: {enabled: false, maxMoves: 2}
dra: {gpuDrivers: [x.example.com], gpuDeviceClasses: []}
learnedNodes: {maxNodes: 9, ttlSeconds: 10}
)",
                            "t.yaml");
  REQUIRE(c.isOk());
  const troupe::config::ServeConfig& v = c.value();
  CHECK(v.listen == "0.0.0.0:9");
  CHECK(v.max_body_bytes == 2048);
  CHECK(v.log_level == "warn");
  CHECK(v.policy.name == "troupe");
  CHECK(v.policy.args.troupe.pack_weight == 0.7);
  CHECK(v.narrow_to_best);
  CHECK(v.topology_preset == "gke");
  CHECK(v.gang.timeout == std::chrono::seconds(30));
  CHECK(v.gang.max_timeout == std::chrono::minutes(1));
  CHECK(v.gang.max_gangs == 7);
  CHECK(v.bind_workers == 3);
  CHECK(v.scheduler_names == std::vector<std::string>{"a", "b"});
  CHECK_FALSE(v.defrag.enabled);
  CHECK(v.defrag.max_moves == 2);
  CHECK(v.dra.gpu_drivers == std::vector<std::string>{"x.example.com"});
  CHECK(v.dra.gpu_device_classes.empty());
  CHECK(v.learned_nodes.max_nodes == 9);
  CHECK(v.learned_nodes.ttl == std::chrono::seconds(10));
}

TEST_CASE("config sections: with errors in several sections the first in parsing order is reported",
          "[config]") {
  // The parsing order: listen, maxBodyBytes, logLevel, policy, filter, limits, metrics, topology,
  // gang, binder, schedulerNames, defrag, queues, dra, learnedNodes.
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"logLevel: loud\n", "logLevel:"},
      {"policy: {name: nope}\n", "policy.name:"},
      {"filter: {narrowTo: some}\n", "filter.narrowTo:"},
      {"topology: {preset: nope}\n", "topology.preset:"},
      {"gang: {maxGangs: 0}\n", "gang.maxGangs:"},
      {"binder: {workers: 0}\n", "binder.workers:"},
      {"schedulerNames: []\n", "schedulerNames:"},
      {"defrag: {maxMoves: 99}\n", "defrag.maxMoves:"},
      {"dra: {gpuDrivers: [Bad_Name]}\n", "dra.gpuDrivers[0]:"},
      {"learnedNodes: {maxNodes: 0}\n", "learnedNodes.maxNodes:"},
  };
  for (size_t i = 0; i + 1 < bad.size(); ++i) {
    // The later section written first in the file: the order of parsing decides, not the file's.
    auto c = parseServeConfig(bad[i + 1].first + bad[i].first, "t.yaml");
    INFO(bad[i].second);
    REQUIRE_FALSE(c.isOk());
    CHECK_THAT(c.status().message(), Catch::Contains(bad[i].second));
  }
}
