// The pod contract: parseGpuRequest and parseGpuAssignment.
#include "troupe/sched/request/pod_request.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "support/fixtures.h"

namespace {

using troupe::Code;
using troupe::sched::ContainerResources;
using troupe::sched::GpuRequest;
using troupe::sched::parseGpuAssignment;
using troupe::sched::parseGpuRequest;
using troupe::sched::PodFacts;
using troupe::sched::TopologyMode;

ContainerResources gpuLimit(const std::string& q) {
  ContainerResources c;
  c.limits["nvidia.com/gpu"] = q;
  return c;
}
ContainerResources gpuRequest(const std::string& q) {
  ContainerResources c;
  c.requests["nvidia.com/gpu"] = q;
  return c;
}
ContainerResources sidecar(const std::string& q) {
  ContainerResources c = gpuLimit(q);
  c.restartable_init = true;
  return c;
}

PodFacts pod(std::vector<ContainerResources> app, std::vector<ContainerResources> init = {}) {
  PodFacts p;
  p.ns = "team";
  p.name = "p";
  p.uid = "uid-p";
  p.containers = std::move(app);
  p.init_containers = std::move(init);
  return p;
}

GpuRequest mustParse(const PodFacts& p) {
  auto r = parseGpuRequest(p);
  INFO(r.status().message());
  REQUIRE(r.isOk());
  return r.value();
}

}  // namespace

TEST_CASE("pod request: GPU count from requests, limits and init containers", "[pod]") {
  struct Case {
    const char* what;
    PodFacts pod;
    int gpus;
  };
  const Case cases[] = {
      {"limits only", pod({gpuLimit("4")}), 4},
      {"requests only", pod({gpuRequest("2")}), 2},
      {"no GPU at all", pod({ContainerResources{}}), 0},
      {"no containers", pod({}), 0},
      {"zero", pod({gpuLimit("0")}), 0},
      {"app containers add up", pod({gpuLimit("2"), gpuRequest("2"), gpuLimit("1")}), 5},
      {"init container larger than the app", pod({gpuLimit("4")}, {gpuLimit("6")}), 6},
      {"init container smaller than the app", pod({gpuLimit("4")}, {gpuLimit("3")}), 4},
      {"largest init wins, inits do not add", pod({gpuLimit("1")}, {gpuLimit("3"), gpuLimit("5")}), 5},
      {"sidecar adds to the app", pod({gpuLimit("2")}, {sidecar("1")}), 3},
      {"sidecar before an init runs beside it", pod({gpuLimit("2")}, {sidecar("1"), gpuLimit("4")}), 5},
      {"sidecar after an init does not", pod({gpuLimit("2")}, {gpuLimit("4"), sidecar("1")}), 4},
      {"two sidecars and an app", pod({gpuLimit("4")}, {sidecar("1"), sidecar("2")}), 7},
      {"64 GPUs is the most", pod({gpuLimit("64")}), 64},
      {"quantity forms", pod({gpuLimit("2000m")}), 2},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    GpuRequest r = mustParse(c.pod);
    CHECK(r.gpus == c.gpus);
    CHECK(r.milli_per_gpu == 1000);
    CHECK(r.wantsGpus() == (c.gpus > 0));
    CHECK_FALSE(r.shared());
    CHECK(r.totalMilli() == c.gpus * 1000);
    CHECK(r.topology == TopologyMode::kPreferred);
    CHECK(r.models.empty());
    CHECK(r.min_memory_bytes == 0);
  }
}

TEST_CASE("pod request: requests win over limits", "[pod]") {
  ContainerResources c;
  c.requests["nvidia.com/gpu"] = "2";
  c.limits["nvidia.com/gpu"] = "4";
  CHECK(mustParse(pod({c})).gpus == 2);
}

TEST_CASE("pod request: cpu and memory requests are read", "[pod]") {
  ContainerResources a, b;
  a.requests["cpu"] = "500m";
  a.requests["memory"] = "1Gi";
  b.limits["cpu"] = "1.5";
  b.limits["memory"] = "512Mi";
  GpuRequest r = mustParse(pod({a, b}));
  CHECK(r.cpu_milli == 2000);
  CHECK(r.memory_bytes == 1073741824LL + 536870912LL);
  CHECK(r.gpus == 0);
}

TEST_CASE("pod request: annotations", "[pod]") {
  SECTION("gpu-model list, trimmed, empty parts dropped") {
    auto p =
        troupe::testing::gpuPod("m", 2, {{"troupe.dev/gpu-model", " NVIDIA-H100-80GB-HBM3 ,, nvidia-h200 "}});
    GpuRequest r = mustParse(p);
    CHECK(r.models == std::vector<std::string>{"NVIDIA-H100-80GB-HBM3", "nvidia-h200"});
  }
  SECTION("gpu-memory is a quantity in bytes") {
    struct Case {
      const char* text;
      int64_t bytes;
    };
    for (const Case& c :
         {Case{"40Gi", 42949672960LL}, Case{"80G", 80000000000LL}, Case{"81559Mi", 81559LL * 1024 * 1024}}) {
      INFO(c.text);
      auto p = troupe::testing::gpuPod("m", 1, {{"troupe.dev/gpu-memory", c.text}});
      CHECK(mustParse(p).min_memory_bytes == c.bytes);
    }
  }
  SECTION("topology modes, any case") {
    struct Case {
      const char* text;
      TopologyMode mode;
    };
    for (const Case& c : {Case{"nvlink", TopologyMode::kNVLink}, Case{"NVLink", TopologyMode::kNVLink},
                          Case{"preferred", TopologyMode::kPreferred}, Case{" none ", TopologyMode::kNone},
                          Case{"NONE", TopologyMode::kNone}}) {
      INFO(c.text);
      auto p = troupe::testing::gpuPod("t", 4, {{"troupe.dev/gpu-topology", c.text}});
      CHECK(mustParse(p).topology == c.mode);
    }
    CHECK(std::string(troupe::sched::topologyModeName(TopologyMode::kNVLink)) == "nvlink");
    CHECK(std::string(troupe::sched::topologyModeName(TopologyMode::kPreferred)) == "preferred");
    CHECK(std::string(troupe::sched::topologyModeName(TopologyMode::kNone)) == "none");
  }
  SECTION("gpu-milli makes a shared one-GPU request") {
    for (int m : {1, 250, 500, 999, 1000}) {
      INFO(m);
      auto p = troupe::testing::gpuPod("s", 0, {{"troupe.dev/gpu-milli", std::to_string(m)}});
      GpuRequest r = mustParse(p);
      CHECK(r.gpus == 1);
      CHECK(r.milli_per_gpu == m);
      CHECK(r.shared() == (m < 1000));
      CHECK(r.totalMilli() == m);
    }
  }
  SECTION("labels stand in for annotations; annotations win") {
    auto p = troupe::testing::gpuPod("l", 2);
    p.labels["troupe.dev/gpu-topology"] = "nvlink";
    p.labels["troupe.dev/gpu-model"] = "A";
    CHECK(mustParse(p).topology == TopologyMode::kNVLink);
    CHECK(mustParse(p).models == std::vector<std::string>{"A"});
    p.annotations["troupe.dev/gpu-topology"] = "none";
    CHECK(mustParse(p).topology == TopologyMode::kNone);
  }
}

TEST_CASE("pod request: a share asked as the resource troupe.dev/gpu-milli", "[pod]") {
  ContainerResources c;
  c.limits["troupe.dev/gpu-milli"] = "300";
  GpuRequest r = mustParse(pod({c}));
  CHECK(r.gpus == 1);
  CHECK(r.milli_per_gpu == 300);
  CHECK(r.shared());
  SECTION("the annotation may repeat it") {
    PodFacts p = pod({c});
    p.annotations["troupe.dev/gpu-milli"] = "300";
    CHECK(mustParse(p).milli_per_gpu == 300);
  }
  SECTION("but not contradict it") {
    PodFacts p = pod({c});
    p.annotations["troupe.dev/gpu-milli"] = "500";
    auto bad = parseGpuRequest(p);
    REQUIRE_FALSE(bad.isOk());
    CHECK_THAT(bad.status().message(), Catch::Contains("troupe.dev/gpu-milli=300") && Catch::Contains("500"));
  }
  SECTION("out of range, or beside nvidia.com/gpu") {
    ContainerResources big;
    big.limits["troupe.dev/gpu-milli"] = "1500";
    auto bad = parseGpuRequest(pod({big}));
    REQUIRE_FALSE(bad.isOk());
    CHECK_THAT(bad.status().message(), Catch::Contains("from 1 to 1000"));
    ContainerResources both = gpuLimit("1");
    both.limits["troupe.dev/gpu-milli"] = "500";
    auto twice = parseGpuRequest(pod({both}));
    REQUIRE_FALSE(twice.isOk());
    CHECK_THAT(twice.status().message(), Catch::Contains("remove one of the two"));
  }
}

TEST_CASE("pod request: every bad value names its key and the value", "[pod]") {
  struct Bad {
    const char* what;
    PodFacts pod;
    const char* key;
    const char* value;
  };
  using troupe::testing::gpuPod;
  const Bad cases[] = {
      {"gpu-memory not a quantity", gpuPod("b", 1, {{"troupe.dev/gpu-memory", "lots"}}),
       "troupe.dev/gpu-memory", "lots"},
      {"gpu-memory zero", gpuPod("b", 1, {{"troupe.dev/gpu-memory", "0"}}), "troupe.dev/gpu-memory", "\"0\""},
      {"gpu-memory negative", gpuPod("b", 1, {{"troupe.dev/gpu-memory", "-40Gi"}}), "troupe.dev/gpu-memory",
       "-40Gi"},
      {"gpu-topology unknown", gpuPod("b", 2, {{"troupe.dev/gpu-topology", "fast"}}),
       "troupe.dev/gpu-topology", "fast"},
      {"gpu-topology empty", gpuPod("b", 2, {{"troupe.dev/gpu-topology", ""}}), "troupe.dev/gpu-topology",
       "\"\""},
      {"gpu-milli zero", gpuPod("b", 0, {{"troupe.dev/gpu-milli", "0"}}), "troupe.dev/gpu-milli", "\"0\""},
      {"gpu-milli too large", gpuPod("b", 0, {{"troupe.dev/gpu-milli", "2000"}}), "troupe.dev/gpu-milli",
       "2000"},
      {"gpu-milli not a number", gpuPod("b", 0, {{"troupe.dev/gpu-milli", "abc"}}), "troupe.dev/gpu-milli",
       "abc"},
      {"gpu-milli with a suffix", gpuPod("b", 0, {{"troupe.dev/gpu-milli", "500m"}}), "troupe.dev/gpu-milli",
       "500m"},
      {"gpu-milli negative", gpuPod("b", 0, {{"troupe.dev/gpu-milli", "-5"}}), "troupe.dev/gpu-milli", "-5"},
      {"gpu-milli together with nvidia.com/gpu", gpuPod("b", 1, {{"troupe.dev/gpu-milli", "500"}}),
       "troupe.dev/gpu-milli", "500"},
      {"gpu-model only commas", gpuPod("b", 1, {{"troupe.dev/gpu-model", " , "}}), "troupe.dev/gpu-model",
       " , "},
      {"fractional nvidia.com/gpu", pod({gpuLimit("500m")}), "nvidia.com/gpu", "500m"},
      {"nvidia.com/gpu not a quantity", pod({gpuLimit("four")}), "nvidia.com/gpu", "four"},
      {"negative nvidia.com/gpu", pod({gpuLimit("-1")}), "nvidia.com/gpu", "-1"},
      {"more GPUs than any node", pod({gpuLimit("65")}), "nvidia.com/gpu", "65"},
      {"bad init container quantity", pod({gpuLimit("1")}, {gpuLimit("x1")}), "nvidia.com/gpu", "x1"},
  };
  for (const Bad& c : cases) {
    INFO(c.what);
    auto r = parseGpuRequest(c.pod);
    REQUIRE_FALSE(r.isOk());
    CHECK(r.status().code() == Code::kInvalidArgument);
    CHECK_THAT(r.status().message(), Catch::Contains(c.key));
    CHECK_THAT(r.status().message(), Catch::Contains(c.value));
  }
}

TEST_CASE("pod request: a bad cpu quantity is reported too", "[pod]") {
  ContainerResources c = gpuLimit("1");
  c.requests["cpu"] = "two";
  auto r = parseGpuRequest(pod({c}));
  REQUIRE_FALSE(r.isOk());
  CHECK_THAT(r.status().message(), Catch::Contains("cpu") && Catch::Contains("two"));
}

TEST_CASE("pod request: parseGpuAssignment", "[pod]") {
  struct Good {
    const char* text;
    std::vector<int> gpus;
  };
  for (const Good& c : {Good{"0,1,2,3", {0, 1, 2, 3}}, Good{" 3, 1 ", {3, 1}}, Good{"7", {7}},
                        Good{"63", {63}}, Good{"1,,2", {1, 2}}, Good{"0, 5,", {0, 5}}}) {
    INFO(c.text);
    auto r = parseGpuAssignment(c.text);
    REQUIRE(r.isOk());
    CHECK(r.value() == c.gpus);
  }
  for (const char* bad : {"", " , ", "a", "1,1", "64", "-1", "1.5", "0x1", "1 2", "2,3,2"}) {
    INFO("\"" << bad << "\"");
    auto r = parseGpuAssignment(bad);
    REQUIRE_FALSE(r.isOk());
    CHECK(r.status().code() == Code::kInvalidArgument);
    CHECK_THAT(r.status().message(), Catch::Contains("troupe.dev/gpus=\"" + std::string(bad) + "\""));
  }
}
