// Hostile input to the parsers of untrusted text (node annotations and labels, pod annotations
// and requests, request bodies): each reproduction of the security review (C1, C2, I1 and the
// source-audit items) is an error that names the field and the value, never an exception, a
// wrapped number or undefined behaviour. See docs/fuzzing.md for the fuzz targets that keep it so.
#include <catch2/catch.hpp>
#include <chrono>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "adapters/http/wire.h"
#include "adapters/kube/watch/kube_objects.h"
#include "support/fixtures.h"
#include "troupe/common/quantity.h"
#include "troupe/model/node.h"
#include "troupe/model/topology.h"
#include "troupe/sched/gang/gang.h"
#include "troupe/sched/request/pod_request.h"
#include "troupe/sched/scheduler/scheduler.h"
#include "troupe/sched/score/placement.h"

using namespace troupe;
using Catch::Contains;
using troupe::testing::gpuNode;
using troupe::testing::gpuPod;

namespace {

const std::string kHugeCell = "NV99999999999";  // does not fit an int: std::stoi threw (C1)

model::NodeFacts matrixNode(const std::string& cell) {
  model::NodeFacts n = gpuNode("mat-node", 2);
  n.annotations[model::kAnnotationGpuTopology] = "[[\"X\",\"" + cell + "\"],[\"" + cell + "\",\"X\"]]";
  return n;
}

sched::ContainerResources gpus(const std::string& q) {
  sched::ContainerResources c;
  c.requests["nvidia.com/gpu"] = q;
  return c;
}

sched::PodFacts podWith(std::vector<sched::ContainerResources> app,
                        std::vector<sched::ContainerResources> init = {}) {
  sched::PodFacts p;
  p.ns = "team";
  p.name = "p";
  p.uid = "uid-p";
  p.containers = std::move(app);
  p.init_containers = std::move(init);
  return p;
}

std::unique_ptr<sched::Scheduler> fleet(int nodes) {
  auto s = std::make_unique<sched::Scheduler>(sched::SchedulerConfig{});
  for (int i = 0; i < nodes; ++i) REQUIRE(s->upsertNode(gpuNode("n" + std::to_string(i), 8)).isOk());
  return s;
}

std::vector<std::string> names(int nodes) {
  std::vector<std::string> out;
  for (int i = 0; i < nodes; ++i) out.push_back("n" + std::to_string(i));
  return out;
}

// Every node unresolvable, each reason containing all of `words`.
void requireUnresolvable(const sched::FilterResult& r, int nodes, const std::vector<std::string>& words) {
  CHECK(r.passed.empty());
  REQUIRE(r.unresolvable.size() == static_cast<size_t>(nodes));
  for (const auto& e : r.unresolvable.entries()) {
    for (const std::string& w : words) CHECK_THAT(r.unresolvable.reasons()[e.reason], Contains(w));
  }
}

}  // namespace

TEST_CASE("hostile C1: an NVLink count that does not fit an int is an error naming the cell", "[hostile]") {
  int links = -1;
  Result<model::LinkKind> kind = Result<model::LinkKind>(invalidArgument("unset"));
  REQUIRE_NOTHROW(kind = model::parseLinkKind(kHugeCell, &links));
  REQUIRE_FALSE(kind.isOk());
  CHECK_THAT(kind.status().message(), Contains(kHugeCell));
  CHECK_THAT(kind.status().message(), Contains("1 to 64"));
  for (const char* cell : {"NV0", "NV65", "NV2147483648", "NV-1", "NV+1", "NV 4", "NV4 "}) {
    INFO(cell);
    REQUIRE_NOTHROW(kind = model::parseLinkKind(cell, &links));
    CHECK_FALSE(kind.isOk());
  }
  REQUIRE(model::parseLinkKind("NV64", &links).isOk());
  CHECK(links == 64);
  REQUIRE(model::parseLinkKind("nv1", &links).isOk());
  CHECK(links == 1);

  // The node annotation (the watch thread's path, and upsertNode's for full-node requests).
  model::TopologyCatalog catalog;
  Result<model::NodeInfo> info = invalidArgument("unset");
  REQUIRE_NOTHROW(info = model::nodeFromFacts(matrixNode(kHugeCell), catalog));
  REQUIRE_FALSE(info.isOk());
  CHECK_THAT(info.status().message(), Contains("troupe.dev/gpu-topology"));
  CHECK_THAT(info.status().message(), Contains(kHugeCell));
  CHECK_THAT(info.status().message(), Contains("mat-node"));
  sched::Scheduler s(sched::SchedulerConfig{});
  Status up = Status::ok();
  REQUIRE_NOTHROW(up = s.upsertNode(matrixNode(kHugeCell)));
  CHECK(up.code() == Code::kInvalidArgument);
  CHECK(s.nodeCount() == 0);
}

TEST_CASE("hostile C1: link bandwidths must be finite numbers of GB/s, all of the text", "[hostile]") {
  model::TopologyCatalog catalog;
  for (const char* cell : {"NV4:nan", "NV4:inf", "NV4:-inf", "NV4:1e999", "NV4:12abc", "NV4:-5",
                           "NV4:", "NV4:0x10", "NV4:2000000", "NV4:1e400"}) {
    INFO(cell);
    Result<model::NodeInfo> info = invalidArgument("unset");
    REQUIRE_NOTHROW(info = model::nodeFromFacts(matrixNode(cell), catalog));
    REQUIRE_FALSE(info.isOk());
    CHECK_THAT(info.status().message(), Contains("bandwidth"));
    CHECK_THAT(info.status().message(), Contains(cell));
  }
  for (const auto& [cell, bandwidth] : std::vector<std::pair<std::string, double>>{
           {"NV4:450", 450}, {"NV4: 12.5 ", 12.5}, {"PIX:0", 0}, {"NV4:1e3", 1000}}) {
    INFO(cell);
    Result<model::NodeInfo> info = model::nodeFromFacts(matrixNode(cell), catalog);
    INFO(info.status().message());
    REQUIRE(info.isOk());
    CHECK(info.value().topology->link(0, 1).bandwidth == bandwidth);
  }
}

TEST_CASE("hostile C2: gang-timeout text std::stod threw on is an error naming the annotation", "[hostile]") {
  const std::vector<std::string> bad = {".",
                                        ".s",
                                        std::string(400, '1') + "s",
                                        std::string(400, '1'),
                                        "1..5s",
                                        "1.2.3s",
                                        "..",
                                        "s",
                                        "-5s",
                                        "1e3s",
                                        "0x10s",
                                        "5 s"};
  for (const std::string& text : bad) {
    INFO(text);
    Result<std::chrono::milliseconds> d = invalidArgument("unset");
    REQUIRE_NOTHROW(d = sched::parseDuration(text));
    REQUIRE_FALSE(d.isOk());
    CHECK_THAT(d.status().message(), Contains(text));

    sched::PodFacts pod =
        gpuPod("m-0", 1, {{sched::kGangName, "g"}, {sched::kGangSize, "2"}, {sched::kGangTimeout, text}});
    Result<std::optional<sched::GangSpec>> gang = invalidArgument("unset");
    REQUIRE_NOTHROW(gang = sched::parseGang(pod, std::chrono::minutes(5)));
    REQUIRE_FALSE(gang.isOk());
    CHECK_THAT(gang.status().message(), Contains("troupe.dev/gang-timeout=\"" + text + "\""));
  }
  // Through the scheduler, as /filter and the binder's re-filter reach it: every node is
  // unresolvable with the annotation in the reason (it was HTTP 500 "internal error: stod").
  auto s = fleet(3);
  for (const std::string& text : std::vector<std::string>{".", ".s", std::string(400, '1') + "s"}) {
    INFO(text);
    sched::PodFacts pod =
        gpuPod("m-0", 1, {{sched::kGangName, "g"}, {sched::kGangSize, "2"}, {sched::kGangTimeout, text}});
    sched::FilterResult r;
    REQUIRE_NOTHROW(r = s->filter(pod, names(3)));
    requireUnresolvable(r, 3, {"troupe.dev/gang-timeout", text});
    CHECK(r.categories.at("invalid-pod") == 3);
  }
}

TEST_CASE("hostile C2: durations are range-checked in every step, at most 100 years", "[hostile]") {
  using std::chrono::hours;
  using std::chrono::milliseconds;
  CHECK(sched::parseDuration("876000h").value() == hours(876000));  // exactly 100 years
  CHECK(sched::parseDuration("1.5h").value() == std::chrono::minutes(90));
  CHECK(sched::parseDuration(" 90s ").value() == std::chrono::seconds(90));
  CHECK(sched::parseDuration("1h30m15s250ms").value() == milliseconds(5415250));
  CHECK(sched::parseDuration("0.0001ms").value() == milliseconds(0));  // truncated: parseGang refuses 0
  CHECK(sched::parseDuration("0." + std::string(400, '0') + "1s").value() == milliseconds(0));
  // Too long: each term (value x unit, which overflowed int64 before) and the sum.
  for (const std::string& text : std::vector<std::string>{
           "876000h1ms", "3000000h", "99999999999999999h", "9223372036854775807ms", "9223372036854775808ms",
           "5000000000h5000000000h", "876000h876000h", "1" + std::string(300, '0') + "h"}) {
    INFO(text);
    Result<milliseconds> d = sched::parseDuration(text);
    REQUIRE_FALSE(d.isOk());
    CHECK_THAT(d.status().message(), Contains("100 years"));
    CHECK_THAT(d.status().message(), Contains(text));
  }
  // The longest accepted timeout still makes a deadline that fits steady_clock's nanoseconds.
  const auto deadline = std::chrono::steady_clock::now() + sched::kMaxDuration;
  CHECK(deadline > std::chrono::steady_clock::now());
}

TEST_CASE("hostile: gang sizes are plain whole numbers", "[hostile]") {
  for (const char* size :
       {"2147483648", "99999999999999999999", " 3", "3 ", "+3", "-3", "3e2", "0", "100001", ""}) {
    INFO(size);
    sched::PodFacts pod = gpuPod("m-0", 1, {{sched::kGangName, "g"}, {sched::kGangSize, size}});
    Result<std::optional<sched::GangSpec>> gang = sched::parseGang(pod, std::chrono::minutes(5));
    if (std::string(size).empty()) {
      CHECK_FALSE(gang.isOk());  // an empty size reads as absent: the error asks for one
      continue;
    }
    REQUIRE_FALSE(gang.isOk());
    CHECK_THAT(gang.status().message(), Contains("troupe.dev/gang-size=\"" + std::string(size) + "\""));
  }
  sched::PodFacts pod = gpuPod("m-0", 1, {{sched::kGangName, "g"}, {sched::kGangSize, "100000"}});
  CHECK(sched::parseGang(pod, std::chrono::minutes(5)).value()->min_member == 100000);
}

TEST_CASE("hostile I1: GPU requests that add up past int64 are refused, not wrapped", "[hostile]") {
  // 9223372036854775 GPUs are 9223372036854775000 thousandths: each fits int64, the sum does not.
  const std::string big = "9223372036854775";
  struct Case {
    const char* what;
    sched::PodFacts pod;
  };
  sched::ContainerResources sidecar = gpus(big);
  sidecar.restartable_init = true;
  const std::vector<Case> cases = {
      {"wraps to 8 GPUs", podWith({gpus(big), gpus(big), gpus("9616m")})},
      {"wraps negative (was 0 GPUs)", podWith({gpus(big), gpus(big)})},
      {"sidecars", podWith({gpus("1")}, {sidecar, sidecar})},
      {"app + sidecars", podWith({gpus(big)}, {sidecar})},
      {"sidecar + init container", podWith({}, {sidecar, gpus(big)})},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    Result<sched::GpuRequest> r = sched::parseGpuRequest(c.pod);
    if (r.isOk()) INFO("parsed as " << r.value().gpus << " GPUs");
    REQUIRE_FALSE(r.isOk());
    CHECK_THAT(r.status().message(), Contains("nvidia.com/gpu"));
    CHECK(r.status().code() == Code::kInvalidArgument);
  }
  // Through filter: no node passes (an 8-GPU pod passed, and a 0-GPU pod passed every node).
  auto s = fleet(2);
  for (const Case& c : {cases[0], cases[1]}) {
    INFO(c.what);
    requireUnresolvable(s->filter(c.pod, names(2)), 2, {"nvidia.com/gpu"});
  }
  // The same for troupe.dev/gpu-milli as a resource, cpu and memory.
  for (const char* resource : {"troupe.dev/gpu-milli", "cpu", "memory"}) {
    INFO(resource);
    sched::ContainerResources c;
    c.requests[resource] = "9223372036854775807m";
    Result<sched::GpuRequest> r = sched::parseGpuRequest(podWith({gpus("1"), c, c}));
    REQUIRE_FALSE(r.isOk());
    CHECK_THAT(r.status().message(), Contains(resource));
  }
}

TEST_CASE("hostile I1: memory is rounded to bytes without overflow, and bounded", "[hostile]") {
  sched::ContainerResources c = gpus("1");
  c.requests["memory"] = "9223372036854775";  // 9223372036854775000 thousandths: + 999 overflowed
  Result<sched::GpuRequest> r = sched::parseGpuRequest(podWith({c}));
  INFO(r.status().message());
  REQUIRE(r.isOk());
  CHECK(r.value().memory_bytes == 9223372036854775);
  c.requests["memory"] = "1001m";
  CHECK(sched::parseGpuRequest(podWith({c})).value().memory_bytes == 2);
  c.requests["memory"] = "1000m";
  CHECK(sched::parseGpuRequest(podWith({c})).value().memory_bytes == 1);
  // CPU beyond what the model can add up is refused with the resource named.
  c.requests["cpu"] = "9223372036854775";  // millicores: more than kMaxResourceAmount
  r = sched::parseGpuRequest(podWith({c}));
  REQUIRE_FALSE(r.isOk());
  CHECK_THAT(r.status().message(), Contains("resource cpu="));
  c.requests["cpu"] = std::to_string(kMaxResourceAmount) + "m";
  CHECK(sched::parseGpuRequest(podWith({c})).isOk());
}

TEST_CASE("hostile: troupe.dev/gpu-milli and troupe.dev/gpus are plain whole numbers", "[hostile]") {
  for (const char* milli : {" 500", "+500", "500 ", "5e2", "0x1F4", "500.0", "99999999999999999999", "-5"}) {
    INFO(milli);
    sched::PodFacts p = podWith({});
    p.annotations[sched::kAnnotationGpuMilli] = milli;
    Result<sched::GpuRequest> r = sched::parseGpuRequest(p);
    REQUIRE_FALSE(r.isOk());
    CHECK_THAT(r.status().message(), Contains("troupe.dev/gpu-milli=\"" + std::string(milli) + "\""));
  }
  sched::PodFacts p = podWith({});
  p.annotations[sched::kAnnotationGpuMilli] = "500";
  CHECK(sched::parseGpuRequest(p).value().milli_per_gpu == 500);
  for (const char* gpus : {"+1", "1e0", "99999999999999999999", "0x1", "64"}) {
    INFO(gpus);
    CHECK_FALSE(sched::parseGpuAssignment(gpus).isOk());
  }
  CHECK(sched::parseGpuAssignment(" 0, 1 ,63").value() == std::vector<int>{0, 1, 63});
}

TEST_CASE("hostile: quantities at int64's edge, exponents and odd text", "[hostile]") {
  CHECK(parseQuantityValue("9223372036854775807").value() == std::numeric_limits<int64_t>::max());
  CHECK(parseQuantityValue("-9223372036854775808").value() == std::numeric_limits<int64_t>::min());
  for (const char* text : {"9223372036854775808", "9223372036854775807.5", "-9223372036854775809", "8Ei",
                           "1e19", "99999999999999999999Ei"}) {
    INFO(text);
    Result<int64_t> v = parseQuantityValue(text);
    REQUIRE_FALSE(v.isOk());
    CHECK_THAT(v.status().message(), Contains("too large"));
  }
  for (const char* text : {"1e", "1e+-3", "1e-+3", "1e99999999999", "1e 3", "1e3 ", "1.2.3", "."}) {
    INFO(text);
    CHECK_FALSE(parseQuantityValue(text).isOk());
  }
  const std::string long_digits = std::string(400, '9');
  Result<int64_t> v = invalidArgument("unset");
  REQUIRE_NOTHROW(v = parseQuantityMilli(long_digits));
  CHECK_FALSE(v.isOk());
  CHECK(parseQuantityMilli("0." + std::string(400, '0') + "1").isOk());  // far below float noise: 0
  CHECK(parseQuantityMilli("1e+3").value() == 1000000);
  // Powers of ten are applied exactly: 0.001 x 1000 came out one too high at this size.
  CHECK(parseQuantityMilli("72057594037927936m").value() == 72057594037927936);
  CHECK(parseQuantityMilli("9223372036854775807m").value() == std::numeric_limits<int64_t>::max());
  CHECK(parseQuantityMilli("1500m").value() == 1500);
  CHECK(parseQuantityValue("1Ei").value() == int64_t{1} << 60);
  CHECK(parseQuantityMilli("+8").value() == 8000);
}

TEST_CASE("hostile: node capacities the model's arithmetic could overflow are refused", "[hostile]") {
  model::TopologyCatalog catalog;
  struct Case {
    const char* what;
    model::NodeFacts node;
    const char* named;
  };
  model::NodeFacts memory = gpuNode("n", 8);
  memory.labels[model::kLabelGpuMemory] = "9223372036854775807";  // MiB x 2^20 overflowed in placement
  model::NodeFacts cpu = gpuNode("n", 8);
  cpu.cpu = "9223372036854775807m";
  model::NodeFacts negative = gpuNode("n", 8);
  negative.cpu = "-4";
  model::NodeFacts mem = gpuNode("n", 8);
  mem.memory = "8Ei";
  model::NodeFacts pods = gpuNode("n", 8);
  pods.pods = "9223372036854775807";
  for (const Case& c : std::vector<Case>{{"gpu memory label", memory, "nvidia.com/gpu.memory"},
                                         {"cpu", cpu, "cpu"},
                                         {"negative cpu", negative, "cpu"},
                                         {"memory", mem, "memory"},
                                         {"pods", pods, "pods"}}) {
    INFO(c.what);
    Result<model::NodeInfo> info = model::nodeFromFacts(c.node, catalog);
    REQUIRE_FALSE(info.isOk());
    CHECK_THAT(info.status().message(), Contains(c.named));
  }
  // The largest accepted values leave placement's arithmetic exact: a pod asking for more GPU
  // memory than the largest node has is refused for memory, not let through by a wrapped product.
  model::NodeFacts largest = gpuNode("n", 8);
  largest.labels[model::kLabelGpuMemory] = std::to_string(kMaxResourceAmount >> 20);
  largest.cpu = std::to_string(kMaxResourceAmount) + "m";
  REQUIRE(model::nodeFromFacts(largest, catalog).isOk());
  model::NodeState state(model::nodeFromFacts(largest, catalog).value());
  sched::GpuRequest req;
  req.gpus = 1;
  req.min_memory_bytes = std::numeric_limits<int64_t>::max();
  CHECK(sched::findMisfit(state, req) == sched::Misfit::kMemory);
  req.min_memory_bytes = 0;
  req.cpu_milli = kMaxResourceAmount;
  CHECK(sched::findMisfit(state, req) == sched::Misfit::kNone);
}

TEST_CASE("hostile: a node cannot count CPU or memory past its ledger's bound", "[hostile]") {
  model::TopologyCatalog catalog;
  model::NodeFacts f = gpuNode("n", 8);
  model::NodeState node(model::nodeFromFacts(f, catalog).value());
  model::Allocation a;
  a.pod_key = "team/a";
  a.node = "n";
  a.cpu_milli = kMaxResourceAmount;
  int added = 0;
  for (int i = 0; i < 40; ++i) {
    a.pod_uid = "uid-" + std::to_string(i);
    if (node.add(a).isOk()) ++added;
  }
  CHECK(added == 16);  // then refused, where the sum would have gone on towards overflow
  CHECK(node.cpuUsed() == 16 * kMaxResourceAmount);
  a.pod_uid = "negative";
  a.cpu_milli = -1;
  CHECK_FALSE(node.add(a).isOk());
}

TEST_CASE("hostile: unsigned JSON numbers keep their value in the wire decoders", "[hostile][wire]") {
  // 18446744073709551615 was cast to int64 and reported as "-1" (wire.cc:20).
  const std::string pod =
      R"({"metadata":{"name":"p","namespace":"n","uid":"u"},"spec":{"containers":[{"resources":{"limits":{"nvidia.com/gpu":18446744073709551615}}}]}})";
  auto args = http::decodeExtenderArgs(R"({"Pod":)" + pod + R"(,"NodeNames":["n0"]})");
  REQUIRE(args.isOk());
  CHECK(args.value().pod.containers.at(0).limits.at("nvidia.com/gpu") == "18446744073709551615");
  Result<sched::GpuRequest> req = sched::parseGpuRequest(args.value().pod);
  REQUIRE_FALSE(req.isOk());
  CHECK_THAT(req.status().message(), Contains("18446744073709551615"));

  const std::string node =
      R"({"metadata":{"name":"a"},"status":{"allocatable":{"nvidia.com/gpu":18446744073709551615}}})";
  auto full = http::decodeExtenderArgs(R"({"Pod":)" + pod + R"(,"Nodes":{"items":[)" + node + "]}}");
  REQUIRE(full.isOk());
  CHECK(full.value().nodes.at(0).allocatable_gpus == "18446744073709551615");
  CHECK(adapters::nodeFromJson(http::Json::parse(node)).value().allocatable_gpus == "18446744073709551615");

  // Priorities and PDB counts that do not fit int64 are refused, naming the field.
  const std::string prio = R"({"metadata":{"name":"p"},"spec":{"priority":18446744073709551615}})";
  auto p = http::decodeExtenderArgs(R"({"Pod":)" + prio + R"(,"NodeNames":[]})");
  REQUIRE_FALSE(p.isOk());
  CHECK_THAT(p.status().message(), Contains("priority"));
  auto pdb = http::decodePreemptionArgs(
      R"({"Pod":{"metadata":{"name":"p"}},"NodeNameToMetaVictims":{"n":{"Pods":[],"NumPDBViolations":18446744073709551615}}})");
  REQUIRE_FALSE(pdb.isOk());
  CHECK_THAT(pdb.status().message(), Contains("NumPDBViolations"));
}

TEST_CASE("hostile: the wire encoders never throw on invalid UTF-8", "[hostile][wire]") {
  // A message cut inside a UTF-8 character (an API error body truncated at byte 200).
  const std::string cut = "pod caf\xc3";
  std::string out;
  REQUIRE_NOTHROW(out = http::encodeBindingResult(cut));
  CHECK(http::Json::accept(out));
  REQUIRE_NOTHROW(out = http::encodeFilterError(cut));
  CHECK(http::Json::accept(out));
  REQUIRE_NOTHROW(out = http::encodeHttpError(cut));
  CHECK(http::Json::accept(out));
  REQUIRE_NOTHROW(out = http::encodeHostPriorityList({{cut, 3}}));
  CHECK(http::Json::accept(out));
  REQUIRE_NOTHROW(out = http::encodePreemptionResult({{cut, {cut}}}, {}));
  CHECK(http::Json::accept(out));
}

TEST_CASE("hostile I1: a pod bound elsewhere counts at most 64 GPUs, never a wrapped sum",
          "[hostile][kube]") {
  // Invalid for the pod contract, so the watch counts its nvidia.com/gpu by Kubernetes' rule;
  // two containers of INT64_MAX GPUs wrapped that count negative.
  const http::Json pod = http::Json::parse(R"({"metadata":{"name":"p","namespace":"n","uid":"u"},
    "spec":{"nodeName":"h100-0","containers":[
      {"resources":{"limits":{"nvidia.com/gpu":"9223372036854775807"}}},
      {"resources":{"limits":{"nvidia.com/gpu":"9223372036854775807"}}}]},"status":{"phase":"Running"}})");
  Result<kube::PodView> v = kube::decodePod(pod);
  REQUIRE(v.isOk());
  CHECK(v.value().gpus == 64);
}
