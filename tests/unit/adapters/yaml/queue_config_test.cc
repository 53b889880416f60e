// The `queues:` section of troupe serve's config: defaults, every key, definitions with the
// Queue spec's fields, errors naming the file, line and key, and --print-config reading back.
#include <catch2/catch.hpp>

#include "adapters/yaml/config.h"

namespace {
using troupe::config::formatServeConfig;
using troupe::config::parseServeConfig;
using troupe::config::QueuesConfig;
}  // namespace

TEST_CASE("queue config: defaults", "[config][queue]") {
  auto c = parseServeConfig("", "t.yaml");
  REQUIRE(c.isOk());
  const QueuesConfig& q = c.value().queues;
  CHECK(q.default_queue == "default");
  CHECK(q.reclaim.min_runtime == std::chrono::minutes(5));
  CHECK(q.reclaim.enabled);
  CHECK(q.reclaim.timeout == std::chrono::minutes(2));
  CHECK(q.definitions.empty());
  const std::string text = formatServeConfig(c.value());
  for (const char* key : {"queues:", "default: default", "minRuntime: 300s", "reclaim: true",
                          "reclaimTimeout: 120s", "definitions: []"}) {
    CHECK_THAT(text, Catch::Contains(key));
  }
}

TEST_CASE("queue config: every key and the definitions", "[config][queue]") {
  const char* yaml = R"(queues:
  default: research
  minRuntime: 90s
  reclaim: false
  reclaimTimeout: 30s
  definitions:
    - name: research
      weight: 2
      guaranteed: {gpus: 8}
      limit: {gpus: 32, products: {NVIDIA-H100-80GB-HBM3: 16}}
    - name: vision
      parent: research
      weight: 0.5
      guaranteed: {gpus: "2.5", products: {NVIDIA-H100-80GB-HBM3: 500m}}
      preemptible: false
)";
  auto c = parseServeConfig(yaml, "q.yaml");
  INFO(c.status().message());
  REQUIRE(c.isOk());
  const QueuesConfig& q = c.value().queues;
  CHECK(q.default_queue == "research");
  CHECK(q.reclaim.min_runtime == std::chrono::seconds(90));
  CHECK_FALSE(q.reclaim.enabled);
  CHECK(q.reclaim.timeout == std::chrono::seconds(30));
  REQUIRE(q.definitions.size() == 2);
  const auto& research = q.definitions[0];
  CHECK(research.name == "research");
  CHECK(research.parent.empty());
  CHECK(research.weight == 2);
  CHECK(research.guaranteed.milli == 8000);
  CHECK(research.limit.milli == 32000);
  CHECK(research.limit.product_milli.at("NVIDIA-H100-80GB-HBM3") == 16000);
  CHECK(research.preemptible);
  const auto& vision = q.definitions[1];
  CHECK(vision.parent == "research");
  CHECK(vision.weight == 0.5);
  CHECK(vision.guaranteed.milli == 2500);
  CHECK(vision.guaranteed.product_milli.at("NVIDIA-H100-80GB-HBM3") == 500);
  CHECK_FALSE(vision.limit.milli.has_value());
  CHECK_FALSE(vision.preemptible);

  // --print-config writes them in a form that reads back to the same queues.
  const std::string text = formatServeConfig(c.value());
  auto back = parseServeConfig(text, "printed.yaml");
  INFO(text);
  REQUIRE(back.isOk());
  CHECK(back.value().queues.definitions == q.definitions);
  CHECK(back.value().queues.default_queue == q.default_queue);
  CHECK(back.value().queues.reclaim.min_runtime == q.reclaim.min_runtime);
  CHECK(back.value().queues.reclaim.enabled == q.reclaim.enabled);
  CHECK(back.value().queues.reclaim.timeout == q.reclaim.timeout);
  CHECK(formatServeConfig(back.value()) == text);
}

TEST_CASE("queue config: errors name the file, the line, the key and the fix", "[config][queue]") {
  struct Case {
    const char* yaml;
    const char* error;
  };
  const std::vector<Case> cases = {
      {"queues:\n  minRuntime: soon\n", "t.yaml:2: queues.minRuntime: is \"soon\": must be a duration"},
      {"queues:\n  reclaimTimeout: 0s\n",
       "t.yaml:2: queues.reclaimTimeout: is \"0s\": must be a positive duration"},
      {"queues:\n  reclaim: maybe\n", "t.yaml:2: queues.reclaim: must be true or false"},
      {"queues:\n  default: Team_A\n", "t.yaml:2: queues.default: \"Team_A\" is not a queue name"},
      {"queues:\n  priority: 3\n", "t.yaml:2: queues.priority: unknown key"},
      {"queues:\n  definitions: {name: a}\n", "t.yaml:2: queues.definitions: must be a list of queues"},
      {"queues:\n  definitions:\n    - weight: 2\n", "t.yaml:3: queues.definitions[0].name: is required"},
      {"queues:\n  definitions:\n    - name: a\n      weight: -1\n",
       "t.yaml:4: queues.definitions[0].weight: is -1: must be a positive number"},
      {"queues:\n  definitions:\n    - name: a\n      weight: lots\n",
       "t.yaml:4: queues.definitions[0].weight: must be a positive number"},
      {"queues:\n  definitions:\n    - name: a\n      limit: {gpus: many}\n",
       "t.yaml:4: queues.definitions[0].limit.gpus: is \"many\": must be a number of GPUs"},
      {"queues:\n  definitions:\n    - name: a\n      limit: {gpus: -4}\n",
       "t.yaml:4: queues.definitions[0].limit.gpus: is \"-4\": must be 0 or more GPUs"},
      {"queues:\n  definitions:\n    - name: a\n      guaranteed: {products: {H100: x}}\n",
       "t.yaml:4: queues.definitions[0].guaranteed.products.H100: is \"x\""},
      {"queues:\n  definitions:\n    - name: a\n      limit: {cpus: 4}\n",
       "t.yaml:4: queues.definitions[0].limit.cpus: unknown key"},
      {"queues:\n  definitions:\n    - name: a\n      preemptible: sometimes\n",
       "t.yaml:4: queues.definitions[0].preemptible: must be true or false"},
      {"queues:\n  definitions:\n    - name: a\n      colour: red\n",
       "t.yaml:4: queues.definitions[0].colour: unknown key"},
  };
  for (const Case& c : cases) {
    INFO(c.yaml);
    auto r = parseServeConfig(c.yaml, "t.yaml");
    REQUIRE_FALSE(r.isOk());
    CHECK_THAT(r.status().message(), Catch::StartsWith(c.error));
  }
}

TEST_CASE("queue config: a definition the queue tree refuses is refused at its line", "[config][queue]") {
  // The tree's checks (here: a parent that does not exist) name the queue's entry.
  auto r = parseServeConfig("queues:\n  definitions:\n    - name: a\n    - name: b\n      parent: nobody\n",
                            "t.yaml");
  REQUIRE_FALSE(r.isOk());
  CHECK_THAT(r.status().message(), Catch::StartsWith("t.yaml:4: queues.definitions[1]: "));
  CHECK_THAT(r.status().message(), Catch::Contains("nobody"));
  r = parseServeConfig("queues:\n  definitions:\n    - name: a\n    - name: a\n", "t.yaml");
  REQUIRE_FALSE(r.isOk());
  CHECK_THAT(r.status().message(), Catch::Contains("queues.definitions["));
}
