// troupe serve's config keys for trust: schedulerNames (the profiles whose pods Troupe binds)
// and learnedNodes (the bounds of learn mode), each error naming the file, line and key.
#include <catch2/catch.hpp>

#include "adapters/yaml/config.h"

namespace {
using troupe::config::checkSchedulerName;
using troupe::config::parseServeConfig;
}  // namespace

TEST_CASE("serve config: schedulerNames and learnedNodes defaults", "[config][security]") {
  auto c = parseServeConfig("listen: 127.0.0.1:1\n", "t.yaml");
  REQUIRE(c.isOk());
  CHECK(c.value().scheduler_names == std::vector<std::string>{"troupe-scheduler"});
  CHECK(c.value().learned_nodes.max_nodes == 10000);
  CHECK(c.value().learned_nodes.ttl == std::chrono::seconds(3600));
}

TEST_CASE("serve config: schedulerNames", "[config][security]") {
  auto c = parseServeConfig("schedulerNames: [gpu-a, gpu.b]\n", "t.yaml");
  REQUIRE(c.isOk());
  CHECK(c.value().scheduler_names == std::vector<std::string>{"gpu-a", "gpu.b"});
  c = parseServeConfig("schedulerNames: []\n", "t.yaml");
  REQUIRE_FALSE(c.isOk());
  CHECK_THAT(c.status().message(), Catch::StartsWith("t.yaml:1: schedulerNames: must be a non-empty list"));
  c = parseServeConfig("schedulerNames: troupe-scheduler\n", "t.yaml");
  REQUIRE_FALSE(c.isOk());
  c = parseServeConfig("schedulerNames:\n  - ok\n  - Not_A_Name\n", "t.yaml");
  REQUIRE_FALSE(c.isOk());
  CHECK_THAT(c.status().message(), Catch::StartsWith("t.yaml:3: schedulerNames[1]: \"Not_A_Name\" is not a"));
}

TEST_CASE("serve config: scheduler profile names are DNS subdomains", "[config][security]") {
  for (const char* good : {"troupe-scheduler", "a", "gpu.example.com", "x1-2.y3"}) {
    INFO(good);
    CHECK(checkSchedulerName(good).isOk());
  }
  const std::vector<std::string> bads = {
      "", "-a", "a-", "A", "a_b", "a..b", "a.-b", ".a", std::string(254, 'a'), std::string(64, 'a') + ".b"};
  for (const std::string& bad : bads) {
    INFO(bad);
    CHECK_FALSE(checkSchedulerName(bad).isOk());
  }
}

TEST_CASE("serve config: learnedNodes", "[config][security]") {
  auto c = parseServeConfig("learnedNodes: {maxNodes: 500, ttlSeconds: 60}\n", "t.yaml");
  REQUIRE(c.isOk());
  CHECK(c.value().learned_nodes.max_nodes == 500);
  CHECK(c.value().learned_nodes.ttl == std::chrono::seconds(60));
  c = parseServeConfig("learnedNodes:\n  maxNodes: 0\n", "t.yaml");
  REQUIRE_FALSE(c.isOk());
  CHECK_THAT(c.status().message(),
             Catch::StartsWith("t.yaml:2: learnedNodes.maxNodes: must be 1 to 1000000"));
  c = parseServeConfig("learnedNodes:\n  ttlSeconds: forever\n", "t.yaml");
  REQUIRE_FALSE(c.isOk());
  CHECK_THAT(c.status().message(), Catch::StartsWith("t.yaml:2: learnedNodes.ttlSeconds: must be"));
  c = parseServeConfig("learnedNodes:\n  ttl: 5\n", "t.yaml");
  REQUIRE_FALSE(c.isOk());
  CHECK_THAT(c.status().message(), Catch::Contains("learnedNodes.ttl: unknown key"));
}

TEST_CASE("serve config: binder.workers bounds the Bindings in flight", "[config]") {
  auto c = parseServeConfig("", "t.yaml");
  REQUIRE(c.isOk());
  CHECK(c.value().bind_workers == 8);
  c = parseServeConfig("binder: {workers: 32}\n", "t.yaml");
  REQUIRE(c.isOk());
  CHECK(c.value().bind_workers == 32);
  c = parseServeConfig("binder:\n  workers: 0\n", "t.yaml");
  REQUIRE_FALSE(c.isOk());
  CHECK_THAT(c.status().message(), Catch::StartsWith("t.yaml:2: binder.workers: must be 1 to 256"));
  c = parseServeConfig("binder:\n  workers: many\n", "t.yaml");
  REQUIRE_FALSE(c.isOk());
  CHECK_THAT(c.status().message(), Catch::Contains("binder.workers"));
  c = parseServeConfig("binder:\n  threads: 4\n", "t.yaml");
  REQUIRE_FALSE(c.isOk());
  CHECK_THAT(c.status().message(), Catch::Contains("binder.threads: unknown key"));
}

TEST_CASE("serve config: dra drivers and device classes", "[config][dra]") {
  auto c = parseServeConfig("listen: 127.0.0.1:1\n", "t.yaml");
  REQUIRE(c.isOk());
  CHECK(c.value().dra.gpu_drivers == std::vector<std::string>{"gpu.nvidia.com"});
  CHECK(c.value().dra.gpu_device_classes == std::vector<std::string>{"gpu.nvidia.com"});
  c = parseServeConfig("dra:\n  gpuDrivers: [gpu.example.com, gpu.nvidia.com]\n  gpuDeviceClasses: []\n",
                       "t.yaml");
  REQUIRE(c.isOk());
  CHECK(c.value().dra.gpu_drivers == std::vector<std::string>{"gpu.example.com", "gpu.nvidia.com"});
  CHECK(c.value().dra.gpu_device_classes.empty());
  // What --print-config writes reads back the same.
  auto again = parseServeConfig(troupe::config::formatServeConfig(c.value()), "printed.yaml");
  REQUIRE(again.isOk());
  CHECK(again.value().dra.gpu_drivers == c.value().dra.gpu_drivers);
  CHECK(again.value().dra.gpu_device_classes.empty());
  c = parseServeConfig("dra:\n  gpuDrivers: [gpu.nvidia.com, GPU_Driver]\n", "t.yaml");
  REQUIRE_FALSE(c.isOk());
  CHECK_THAT(c.status().message(),
             Catch::StartsWith("t.yaml:2: dra.gpuDrivers[1]: \"GPU_Driver\" is not a DNS"));
  c = parseServeConfig("dra:\n  gpuDriver: [gpu.nvidia.com]\n", "t.yaml");
  REQUIRE_FALSE(c.isOk());
  CHECK_THAT(c.status().message(), Catch::Contains("gpuDriver"));
  c = parseServeConfig("dra:\n  gpuDeviceClasses: gpu.nvidia.com\n", "t.yaml");
  REQUIRE_FALSE(c.isOk());
  CHECK_THAT(c.status().message(), Catch::Contains("dra.gpuDeviceClasses: must be a list"));
}
