// `troupe serve --print-config`: formatServeConfig writes every key, and what it writes reads
// back to the same config, defaults and non-defaults alike (scripts/check-defaults.py relies
// on it to compare the chart, deploy/, examples/ and the README with the binary's defaults).
#include <catch2/catch.hpp>
#include <string>
#include <utility>
#include <vector>

#include "adapters/yaml/config.h"

namespace {
using troupe::config::formatServeConfig;
using troupe::config::parseServeConfig;
using troupe::config::ServeConfig;

void checkEqual(const ServeConfig& a, const ServeConfig& b) {
  CHECK(a.listen == b.listen);
  CHECK(a.max_body_bytes == b.max_body_bytes);
  CHECK(a.log_level == b.log_level);
  CHECK(a.policy.name == b.policy.name);
  CHECK(a.policy.args.troupe.pack_weight == b.policy.args.troupe.pack_weight);
  CHECK(a.policy.args.troupe.topology_weight == b.policy.args.troupe.topology_weight);
  CHECK(a.policy.args.troupe.domain_weight == b.policy.args.troupe.domain_weight);
  CHECK(a.policy.args.troupe.balance_weight == b.policy.args.troupe.balance_weight);
  CHECK(a.policy.args.troupe.scarcity_weight == b.policy.args.troupe.scarcity_weight);
  CHECK(a.narrow_to_best == b.narrow_to_best);
  CHECK(a.topology_levels == b.topology_levels);
  CHECK(a.topology_preset == b.topology_preset);
  CHECK(a.gang.timeout == b.gang.timeout);
  CHECK(a.gang.max_timeout == b.gang.max_timeout);
  CHECK(a.gang.max_gangs == b.gang.max_gangs);
  CHECK(a.scheduler_names == b.scheduler_names);
  CHECK(a.bind_workers == b.bind_workers);
  CHECK(a.per_node_series.mode == b.per_node_series.mode);
  CHECK(a.per_node_series.auto_off_at == b.per_node_series.auto_off_at);
  CHECK(a.learned_nodes.max_nodes == b.learned_nodes.max_nodes);
  CHECK(a.learned_nodes.ttl == b.learned_nodes.ttl);
  CHECK(a.limits.max_header_bytes == b.limits.max_header_bytes);
  CHECK(a.limits.max_body_bytes_in_flight == b.limits.max_body_bytes_in_flight);
  CHECK(a.limits.max_connections == b.limits.max_connections);
  CHECK(a.limits.header_timeout_seconds == b.limits.header_timeout_seconds);
  CHECK(a.limits.read_timeout_seconds == b.limits.read_timeout_seconds);
  CHECK(a.limits.idle_timeout_seconds == b.limits.idle_timeout_seconds);
  CHECK(a.limits.write_timeout_seconds == b.limits.write_timeout_seconds);
  CHECK(a.queues.default_queue == b.queues.default_queue);
  CHECK(a.queues.reclaim.min_runtime == b.queues.reclaim.min_runtime);
  CHECK(a.queues.reclaim.enabled == b.queues.reclaim.enabled);
  CHECK(a.queues.reclaim.timeout == b.queues.reclaim.timeout);
  CHECK(a.queues.definitions == b.queues.definitions);
  CHECK(a.defrag.enabled == b.defrag.enabled);
  CHECK(a.defrag.interval == b.defrag.interval);
  CHECK(a.defrag.min_gpus == b.defrag.min_gpus);
  CHECK(a.defrag.min_pending == b.defrag.min_pending);
  CHECK(a.defrag.max_moves == b.defrag.max_moves);
  CHECK(a.defrag.evict == b.defrag.evict);
}
}  // namespace

TEST_CASE("print-config: the defaults read back as the defaults", "[config]") {
  const ServeConfig defaults;
  const std::string text = formatServeConfig(defaults);
  auto parsed = parseServeConfig(text, "printed.yaml");
  REQUIRE(parsed.isOk());
  checkEqual(parsed.value(), defaults);
  CHECK(formatServeConfig(parsed.value()) == text);
  // Every section is written, so a reader sees each default without the source.
  for (const char* key : {"listen:",
                          "maxBodyBytes:",
                          "logLevel:",
                          "policy:",
                          "weights:",
                          "filter:",
                          "narrowTo: all",
                          "topology:",
                          "levels:",
                          "gang:",
                          "timeout: 300s",
                          "maxTimeout: 300s",
                          "maxGangs:",
                          "schedulerNames:",
                          "workers: 8",
                          "perNodeSeries: \"auto\"",
                          "learnedNodes:",
                          "limits:",
                          "writeTimeoutSeconds:",
                          "queues:",
                          "minRuntime: 300s",
                          "reclaimTimeout: 120s",
                          "definitions: []",
                          "defrag:",
                          "interval: 30s",
                          "minPending: 60s",
                          "maxMoves: 4",
                          "evict: false"}) {
    CHECK_THAT(text, Catch::Contains(key));
  }
}

TEST_CASE("print-config: every non-default value reads back unchanged", "[config]") {
  const char* yaml = R"(listen: 0.0.0.0:9999
maxBodyBytes: 2048
logLevel: debug
policy:
  name: binpack
  weights: {pack: 0.25, topology: 0.125, domains: 0.625, balance: 0.375, scarcity: 12}
filter: {narrowTo: best}
topology: {levels: [example.com/hall, example.com/row]}
gang: {timeout: 1500ms, maxTimeout: 90s, maxGangs: 7}
schedulerNames: [gpu-a, gpu-b]
binder: {workers: 3}
metrics: {perNodeSeries: "off", perNodeSeriesOffAt: 50}
learnedNodes: {maxNodes: 5, ttlSeconds: 60}
limits:
  maxHeaderBytes: 4096
  maxBodyBytesInFlight: 1048576
  maxConnections: 3
  headerTimeoutSeconds: 0.5
  readTimeoutSeconds: 1.25
  idleTimeoutSeconds: 7
  writeTimeoutSeconds: 11
queues:
  default: batch
  minRuntime: 0s
  reclaim: false
  reclaimTimeout: 2500ms
  definitions:
    - {name: batch, weight: 3, limit: {gpus: 0.5}}
    - {name: urgent, parent: batch, guaranteed: {products: {NVIDIA-H100-80GB-HBM3: 0.25}}, preemptible: false}
defrag: {enabled: false, interval: 2500ms, minGpus: 2, minPending: 0s, maxMoves: 9, evict: true}
)";
  auto set = parseServeConfig(yaml, "set.yaml");
  REQUIRE(set.isOk());
  CHECK(set.value().gang.timeout.count() == 1500);
  CHECK(set.value().narrow_to_best);
  CHECK(set.value().defrag.evict);
  CHECK(set.value().defrag.max_moves == 9);
  const std::string text = formatServeConfig(set.value());
  CHECK_THAT(text, Catch::Contains("timeout: 1500ms"));
  auto back = parseServeConfig(text, "printed.yaml");
  REQUIRE(back.isOk());
  checkEqual(back.value(), set.value());

  // Bad defrag values are refused with the key and the fix.
  for (const auto& [bad, words] :
       std::vector<std::pair<std::string, std::string>>{{"defrag: {maxMoves: 0}\n", "defrag.maxMoves"},
                                                        {"defrag: {minGpus: 65}\n", "defrag.minGpus"},
                                                        {"defrag: {interval: 0s}\n", "defrag.interval"},
                                                        {"defrag: {evict: maybe}\n", "defrag.evict"},
                                                        {"defrag: {evicts: true}\n", "evicts"}}) {
    auto r = parseServeConfig(bad, "bad.yaml");
    REQUIRE_FALSE(r.isOk());
    CHECK_THAT(r.status().message(), Catch::Contains(words));
  }

  // An empty level list (topology levels off) survives too.
  auto off = parseServeConfig("topology: {levels: []}\n", "off.yaml");
  REQUIRE(off.isOk());
  auto off_back = parseServeConfig(formatServeConfig(off.value()), "printed.yaml");
  REQUIRE(off_back.isOk());
  CHECK(off_back.value().topology_levels.empty());

  // A preset is printed with its expanded levels, and reads back to the same.
  auto preset = parseServeConfig("topology: {preset: nvidia-topograph}\n", "preset.yaml");
  REQUIRE(preset.isOk());
  const std::string printed = formatServeConfig(preset.value());
  CHECK_THAT(printed, Catch::Contains("preset: nvidia-topograph"));
  CHECK_THAT(printed, Catch::Contains("- network.topology.nvidia.com/accelerator"));
  auto preset_back = parseServeConfig(printed, "printed.yaml");
  REQUIRE(preset_back.isOk());
  checkEqual(preset_back.value(), preset.value());
}
