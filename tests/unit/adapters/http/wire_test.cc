// The kube-scheduler extender wire codec against the shared fixtures
// (/work/shared/fixtures/kube-scheduler, see its README).
#include "adapters/http/wire.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cctype>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "support/fixtures.h"
#include "troupe/model/node.h"
#include "troupe/sched/filter/pending_pods.h"
#include "troupe/sched/scheduler/scheduler.h"

namespace {

using troupe::Code;
using troupe::http::Json;

constexpr const char* kPodUid = "3c9a6f1e-7b2d-4e8a-9f10-2a6b5c4d8e71";
constexpr const char* kVictimA1 = "c2f8a4d6-9e1b-4c3a-8d5f-2b7e0a9c1d36";
constexpr const char* kVictimA2First = "1b9d3f5a-7c2e-4a6b-9d8f-0e4c2a6b8d19";
constexpr const char* kVictimA2Second = "8e6c4a2f-0d9b-4f7e-a5c3-6b1d9f7e5a20";

// The fixture's bytes, or nullopt (with a WARN) when the shared directory is not there.
std::optional<std::string> fixture(const std::string& file) {
  auto dir = troupe::testing::sharedDir();
  if (!dir) {
    WARN("shared fixtures not found (set TROUPE_SHARED_DIR to the shared/ directory); skipping " << file);
    return std::nullopt;
  }
  auto text = troupe::testing::readFile(*dir + "/fixtures/kube-scheduler/" + file);
  if (!text) FAIL("cannot read fixture " << file);
  return text;
}

Json parse(const std::string& text) {
  Json j = Json::parse(text, nullptr, false);
  REQUIRE_FALSE(j.is_discarded());
  return j;
}

// Key-by-key comparison: same keys in the same order, same values. With `null_is_empty`, a
// null and an empty object or array count as equal (the protocol treats them alike).
void diffJson(const Json& want, const Json& got, const std::string& path, bool null_is_empty,
              std::vector<std::string>* diffs) {
  auto emptyish = [](const Json& j) { return j.is_null() || (j.is_structured() && j.empty()); };
  if (null_is_empty && emptyish(want) && emptyish(got)) return;
  if (want.type() != got.type()) {
    diffs->push_back(path + ": type " + want.type_name() + " vs " + got.type_name());
    return;
  }
  if (want.is_object()) {
    std::vector<std::string> wk, gk;
    for (auto it = want.begin(); it != want.end(); ++it) wk.push_back(it.key());
    for (auto it = got.begin(); it != got.end(); ++it) gk.push_back(it.key());
    if (wk != gk) diffs->push_back(path + ": keys or key order differ");
    for (const std::string& k : wk) {
      if (got.contains(k)) diffJson(want.at(k), got.at(k), path + "." + k, null_is_empty, diffs);
    }
    return;
  }
  if (want.is_array()) {
    if (want.size() != got.size()) {
      diffs->push_back(path + ": " + std::to_string(want.size()) + " vs " + std::to_string(got.size()) +
                       " elements");
      return;
    }
    for (size_t i = 0; i < want.size(); ++i) {
      diffJson(want[i], got[i], path + "[" + std::to_string(i) + "]", null_is_empty, diffs);
    }
    return;
  }
  if (want != got) diffs->push_back(path + ": " + want.dump() + " vs " + got.dump());
}

void checkSameJson(const std::string& want_text, const std::string& got_text, bool null_is_empty = false) {
  std::vector<std::string> diffs;
  diffJson(parse(want_text), parse(got_text), "$", null_is_empty, &diffs);
  INFO("want: " << want_text.substr(0, 400));
  INFO("got:  " << got_text.substr(0, 400));
  for (const std::string& d : diffs) FAIL_CHECK(d);
  CHECK(diffs.empty());
}

troupe::http::ExtenderArgs mustDecodeArgs(const std::string& body) {
  auto r = troupe::http::decodeExtenderArgs(body);
  INFO(r.status().message());
  REQUIRE(r.isOk());
  return r.value();
}

troupe::http::PreemptionArgs mustDecodePreemption(const std::string& body) {
  auto r = troupe::http::decodePreemptionArgs(body);
  INFO(r.status().message());
  REQUIRE(r.isOk());
  return r.value();
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// The same object with every top-level key rewritten by `f`.
std::string rekey(const std::string& body, std::string (*f)(std::string)) {
  Json in = parse(body), out = Json::object();
  for (auto it = in.begin(); it != in.end(); ++it) out[f(it.key())] = it.value();
  return out.dump();
}

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  return s;
}

void checkInvalid(const troupe::Status& st, const std::string& fragment) {
  INFO("message: " << st.message());
  CHECK(st.code() == Code::kInvalidArgument);
  CHECK_THAT(st.message(), Catch::Contains(fragment));
}

}  // namespace

TEST_CASE("wire: every fixture file decodes", "[wire][fixtures]") {
  auto dir = troupe::testing::sharedDir();
  if (!dir) {
    WARN("shared fixtures not found (set TROUPE_SHARED_DIR); skipping the fixture sweep");
    return;
  }
  enum Kind { kExtenderArgs, kBinding, kPreemption, kResponse };
  const std::map<std::string, Kind> known = {
      {"filter-nodecache.json", kExtenderArgs},
      {"filter-full-nodes.json", kExtenderArgs},
      {"prioritize-nodecache.json", kExtenderArgs},
      {"bind.json", kBinding},
      {"preempt-nodecache.json", kPreemption},
      {"preempt-full.json", kPreemption},
      {"filter-result.json", kResponse},
      {"filter-result-full-nodes.json", kResponse},
      {"filter-result-error.json", kResponse},
      {"prioritize-result.json", kResponse},
      {"bind-result.json", kResponse},
      {"bind-result-error.json", kResponse},
      {"preempt-result.json", kResponse},
  };
  int seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator(*dir + "/fixtures/kube-scheduler")) {
    if (!entry.is_regular_file() || entry.path().extension() != ".json") continue;
    const std::string file = entry.path().filename().string();
    INFO(file);
    auto it = known.find(file);
    if (it == known.end()) {
      FAIL_CHECK("fixture " << file << " is not covered by wire_test.cc");
      continue;
    }
    ++seen;
    auto body = troupe::testing::readFile(entry.path().string());
    REQUIRE(body);
    REQUIRE_FALSE(body->empty());
    CHECK(body->back() != '\n');  // Go's json.Marshal bytes, as the README says
    switch (it->second) {
      case kExtenderArgs: {
        auto r = troupe::http::decodeExtenderArgs(*body);
        INFO(r.status().message());
        CHECK(r.isOk());
        break;
      }
      case kBinding: {
        auto r = troupe::http::decodeBindingArgs(*body);
        INFO(r.status().message());
        CHECK(r.isOk());
        break;
      }
      case kPreemption: {
        auto r = troupe::http::decodePreemptionArgs(*body);
        INFO(r.status().message());
        CHECK(r.isOk());
        break;
      }
      case kResponse: CHECK_FALSE(Json::parse(*body, nullptr, false).is_discarded()); break;
    }
  }
  CHECK(seen == static_cast<int>(known.size()));
}

TEST_CASE("wire: filter-nodecache.json", "[wire][fixtures]") {
  auto body = fixture("filter-nodecache.json");
  if (!body) return;
  auto args = mustDecodeArgs(*body);
  CHECK(args.node_cache_mode);
  CHECK(args.node_names ==
        std::vector<std::string>{"gpu-node-a1", "gpu-node-a2", "gpu-node-a3", "gpu-node-b1"});
  CHECK(args.nodes.empty());
  CHECK(args.node_objects.empty());
  const auto& pod = args.pod;
  CHECK(pod.name == "llm-pretrain-7b-0-x8q4t");
  CHECK(pod.ns == "ml-training");
  CHECK(pod.uid == kPodUid);
  CHECK(pod.key() == "ml-training/llm-pretrain-7b-0-x8q4t");
  CHECK(pod.priority == 100000);
  CHECK(pod.phase == "Pending");
  CHECK(pod.node_name.empty());
  CHECK(pod.labels.size() == 6);
  CHECK(pod.labels.at("job-name") == "llm-pretrain-7b");
  CHECK(pod.annotations.at("example.com/gpu-topology") == "nvlink");
  REQUIRE(pod.containers.size() == 1);
  CHECK(pod.containers[0].requests.at("nvidia.com/gpu") == "4");
  CHECK(pod.containers[0].limits.at("memory") == "480Gi");
  CHECK_FALSE(pod.containers[0].restartable_init);
  CHECK(pod.init_containers.empty());
  auto req = troupe::sched::parseGpuRequest(pod);
  REQUIRE(req.isOk());
  CHECK(req.value().gpus == 4);
  CHECK(req.value().cpu_milli == 48000);
  CHECK(req.value().topology == troupe::sched::TopologyMode::kPreferred);  // example.com keys are not ours
}

TEST_CASE("wire: filter-full-nodes.json", "[wire][fixtures]") {
  auto body = fixture("filter-full-nodes.json");
  if (!body) return;
  auto args = mustDecodeArgs(*body);
  CHECK_FALSE(args.node_cache_mode);
  CHECK(args.node_names == std::vector<std::string>{"gpu-node-a1", "gpu-node-a2", "gpu-node-b1"});
  REQUIRE(args.nodes.size() == 3);
  REQUIRE(args.node_objects.size() == 3);
  CHECK(args.pod.uid == kPodUid);

  const struct {
    const char* product;
    int64_t memory_mib;
    const char* profile;
  } want[] = {
      {"NVIDIA-H100-80GB-HBM3", 81559, "hgx-h100-8"},
      {"NVIDIA-H100-80GB-HBM3", 81559, "hgx-h100-8"},
      {"NVIDIA-A100-SXM4-80GB", 81920, "hgx-a100-8"},
  };
  troupe::model::TopologyCatalog catalog;
  for (size_t i = 0; i < 3; ++i) {
    const auto& n = args.nodes[i];
    INFO(n.name);
    CHECK(n.allocatable_gpus == "8");
    CHECK(n.labels.at("nvidia.com/gpu.product") == want[i].product);
    CHECK(n.labels.at("nvidia.com/gpu.count") == "8");
    CHECK(n.labels.at("kubernetes.io/hostname") == n.name);
    CHECK_FALSE(n.unschedulable);
    CHECK(Json::parse(args.node_objects[i])["metadata"]["name"] == n.name);
    auto info = troupe::model::nodeFromFacts(n, catalog);
    REQUIRE(info.isOk());
    CHECK(info.value().gpu_count == 8);
    CHECK(info.value().gpu_memory_mib == want[i].memory_mib);
    CHECK(info.value().topology->profile() == want[i].profile);
  }

  // End to end: learn the nodes and filter the fixture pod; every node has 8 free GPUs.
  troupe::sched::Scheduler sched(troupe::sched::SchedulerConfig{});
  std::vector<std::string> errors;
  auto result = sched.filterNodes(args.pod, args.nodes, &errors);
  CHECK(errors.empty());
  CHECK(result.passed == args.node_names);
  auto out = parse(troupe::http::encodeFilterResult(args, result));
  CHECK(out["Nodes"]["items"].size() == 3);
  CHECK(out["NodeNames"].is_null());
}

TEST_CASE("wire: prioritize-nodecache.json and bind.json", "[wire][fixtures]") {
  if (auto body = fixture("prioritize-nodecache.json")) {
    auto args = mustDecodeArgs(*body);
    CHECK(args.node_cache_mode);
    CHECK(args.node_names == std::vector<std::string>{"gpu-node-a1", "gpu-node-a2"});
    CHECK(args.pod.uid == kPodUid);
  }
  if (auto body = fixture("bind.json")) {
    auto b = troupe::http::decodeBindingArgs(*body);
    REQUIRE(b.isOk());
    CHECK(b.value().pod_name == "llm-pretrain-7b-0-x8q4t");
    CHECK(b.value().pod_namespace == "ml-training");
    CHECK(b.value().pod_uid == kPodUid);
    CHECK(b.value().node == "gpu-node-a1");
  }
}

TEST_CASE("wire: preempt-nodecache.json and preempt-full.json", "[wire][fixtures]") {
  auto meta_body = fixture("preempt-nodecache.json");
  auto full_body = fixture("preempt-full.json");
  if (!meta_body || !full_body) return;
  const std::map<std::string, std::vector<std::string>> victims = {
      {"gpu-node-a1", {kVictimA1}},
      {"gpu-node-a2", {kVictimA2First, kVictimA2Second}},
  };
  const std::map<std::string, int64_t> pdbs = {{"gpu-node-a1", 0}, {"gpu-node-a2", 1}};

  auto meta = mustDecodePreemption(*meta_body);
  CHECK(meta.meta);
  CHECK(meta.victims == victims);
  CHECK(meta.pdb_violations == pdbs);
  CHECK(meta.pod.name == "vllm-llama3-70b-6f9d8b7c5-k2m9x");
  CHECK(meta.pod.ns == "inference");
  CHECK(meta.pod.uid == "e41d7a9c-5b3f-4d2e-8a1c-7f6b9e0d2c84");
  CHECK(meta.pod.priority == 1000000);
  auto req = troupe::sched::parseGpuRequest(meta.pod);
  REQUIRE(req.isOk());
  CHECK(req.value().gpus == 4);

  auto full = mustDecodePreemption(*full_body);
  CHECK_FALSE(full.meta);
  CHECK(full.victims == victims);  // UIDs from each victim's metadata.uid
  CHECK(full.pdb_violations == pdbs);
  CHECK(full.pod.uid == meta.pod.uid);
}

TEST_CASE("wire: encoders reproduce the response fixtures", "[wire][fixtures]") {
  SECTION("filter-result.json (cache mode)") {
    auto want = fixture("filter-result.json");
    if (!want) return;
    troupe::http::ExtenderArgs args;
    args.node_cache_mode = true;
    args.node_names = {"gpu-node-a1", "gpu-node-a2", "gpu-node-a3", "gpu-node-b1"};
    troupe::sched::FilterResult result;
    result.passed = {"gpu-node-a1", "gpu-node-a2"};
    result.failed.add("gpu-node-a3",
                      "example: 4 free GPUs are split across NVSwitch domains, need 4 in one domain");
    result.unresolvable.add(
        "gpu-node-b1",
        "example: GPU product NVIDIA-A100-SXM4-80GB does not match requested NVIDIA-H100-80GB-HBM3");
    const std::string got = troupe::http::encodeFilterResult(args, result);
    checkSameJson(*want, got);
    CHECK(got == *want);
  }
  SECTION("filter-result-full-nodes.json (full-object mode)") {
    auto request = fixture("filter-full-nodes.json");
    auto want = fixture("filter-result-full-nodes.json");
    if (!request || !want) return;
    auto args = mustDecodeArgs(*request);
    troupe::sched::FilterResult result;
    result.passed = {"gpu-node-a1", "gpu-node-a2"};
    result.unresolvable.add(
        "gpu-node-b1",
        "example: GPU product NVIDIA-A100-SXM4-80GB does not match requested NVIDIA-H100-80GB-HBM3");
    const std::string got = troupe::http::encodeFilterResult(args, result);
    // The fixture has "FailedNodes":{} where we send null; the protocol reads both as "none".
    checkSameJson(*want, got, /*null_is_empty=*/true);
    CHECK(parse(*want)["FailedNodes"].empty());
    CHECK(parse(got)["FailedNodes"].is_null());
    std::string want_null = *want;
    const std::string empty_failed = "\"FailedNodes\":{}";
    auto pos = want_null.find(empty_failed);
    REQUIRE(pos != std::string::npos);
    want_null.replace(pos, empty_failed.size(), "\"FailedNodes\":null");
    CHECK(got == want_null);  // byte-equal otherwise, node objects included
  }
  SECTION("filter-result-error.json") {
    auto want = fixture("filter-result-error.json");
    if (!want) return;
    const std::string got =
        troupe::http::encodeFilterError("example: gang state for ml-training/llm-pretrain-7b is unavailable");
    checkSameJson(*want, got);
    CHECK(got == *want);
  }
  SECTION("prioritize-result.json") {
    auto want = fixture("prioritize-result.json");
    if (!want) return;
    const std::string got = troupe::http::encodeHostPriorityList({{"gpu-node-a1", 8}, {"gpu-node-a2", 3}});
    checkSameJson(*want, got);
    CHECK(got == *want);
    CHECK(parse(got).is_array());
    CHECK(parse(got)[0]["Score"].is_number_integer());
  }
  SECTION("bind-result.json and bind-result-error.json") {
    auto ok = fixture("bind-result.json");
    auto err = fixture("bind-result-error.json");
    if (!ok || !err) return;
    CHECK(troupe::http::encodeBindingResult("") == *ok);
    const std::string got = troupe::http::encodeBindingResult(
        "example: pods \"llm-pretrain-7b-0-x8q4t\" is forbidden: gang not complete");
    checkSameJson(*err, got);
    CHECK(got == *err);
  }
  SECTION("preempt-result.json") {
    auto want = fixture("preempt-result.json");
    if (!want) return;
    const std::string got =
        troupe::http::encodePreemptionResult({{"gpu-node-a1", {kVictimA1}}}, {{"gpu-node-a1", 0}});
    checkSameJson(*want, got);
    CHECK(got == *want);
  }
}

TEST_CASE("wire: encoders without fixtures", "[wire]") {
  troupe::http::ExtenderArgs args;
  args.node_names = {"a", "b"};
  troupe::sched::FilterResult none;
  none.failed.add("a", "busy");
  none.unresolvable.add("b", "never");
  CHECK(
      troupe::http::encodeFilterResult(args, none) ==
      R"({"Nodes":null,"NodeNames":[],"FailedNodes":{"a":"busy"},"FailedAndUnresolvableNodes":{"b":"never"},"Error":""})");
  CHECK(troupe::http::encodeHostPriorityList({}) == "[]");
  CHECK(troupe::http::encodePreemptionResult({}, {}) == R"({"NodeNameToMetaVictims":{}})");
  CHECK(troupe::http::encodePreemptionResult({{"n", {"u1", "u2"}}}, {}) ==
        R"({"NodeNameToMetaVictims":{"n":{"Pods":[{"UID":"u1"},{"UID":"u2"}],"NumPDBViolations":0}}})");
  CHECK(troupe::http::encodeHttpError("bad \"x\"") == R"({"error":"bad \"x\""})");
}

TEST_CASE("wire: full-node mode returns the received node objects unchanged", "[wire][fixtures]") {
  auto body = fixture("filter-full-nodes.json");
  if (!body) return;
  auto args = mustDecodeArgs(*body);
  const Json original = parse(*body);
  const Json& items = original["Nodes"]["items"];
  struct Case {
    std::vector<std::string> passed;
    std::vector<size_t> indices;
  };
  for (const Case& c : {Case{{"gpu-node-b1"}, {2}}, Case{{"gpu-node-a1", "gpu-node-b1"}, {0, 2}},
                        Case{{}, {}}, Case{{"gpu-node-a1", "gpu-node-a2", "gpu-node-b1"}, {0, 1, 2}}}) {
    troupe::sched::FilterResult r;
    r.passed = c.passed;
    const Json out = parse(troupe::http::encodeFilterResult(args, r));
    REQUIRE(out["Nodes"]["items"].size() == c.indices.size());
    CHECK(out["Nodes"]["metadata"] == Json::object());
    CHECK(out["NodeNames"].is_null());
    for (size_t i = 0; i < c.indices.size(); ++i) {
      CHECK(out["Nodes"]["items"][i].dump() == items[c.indices[i]].dump());
    }
  }
}

TEST_CASE("wire: keys match case-insensitively, exact match first; unknown fields ignored", "[wire]") {
  SECTION("an all-lowercase bind.json") {
    auto body = fixture("bind.json");
    if (!body) return;
    auto b = troupe::http::decodeBindingArgs(lower(*body));
    INFO(b.status().message());
    REQUIRE(b.isOk());
    CHECK(b.value().pod_name == "llm-pretrain-7b-0-x8q4t");
    CHECK(b.value().pod_namespace == "ml-training");
    CHECK(b.value().pod_uid == kPodUid);
    CHECK(b.value().node == "gpu-node-a1");
  }
  SECTION("upper- and lower-case ExtenderArgs and preemption keys") {
    auto filter = fixture("filter-nodecache.json");
    auto preempt = fixture("preempt-nodecache.json");
    if (!filter || !preempt) return;
    for (auto f : {&lower, &upper}) {
      auto args = mustDecodeArgs(rekey(*filter, f));
      CHECK(args.node_names.size() == 4);
      CHECK(args.pod.uid == kPodUid);
      auto p = mustDecodePreemption(rekey(*preempt, f));
      CHECK(p.victims.size() == 2);
      CHECK(p.victims.at("gpu-node-a1") == std::vector<std::string>{kVictimA1});
    }
  }
  SECTION("exact match wins over a case-insensitive one") {
    auto b = troupe::http::decodeBindingArgs(
        R"({"node":"wrong","PodName":"p","PodNamespace":"ns","PodUID":"u","Node":"right"})");
    REQUIRE(b.isOk());
    CHECK(b.value().node == "right");
    Json obj = Json::parse(R"({"nodenames":1,"NodeNames":2,"NODENAMES":3})");
    REQUIRE(troupe::adapters::field(obj, "NodeNames"));
    CHECK(*troupe::adapters::field(obj, "NodeNames") == 2);
    CHECK(*troupe::adapters::field(obj, "nodeNAMES") == 1);  // first case-insensitive match
    CHECK(troupe::adapters::field(obj, "Nodes") == nullptr);
    CHECK(troupe::adapters::field(Json::array(), "NodeNames") == nullptr);
  }
  SECTION("unknown fields are ignored") {
    auto b = troupe::http::decodeBindingArgs(
        R"({"PodName":"p","PodNamespace":"ns","PodUID":"u","Node":"n","Future":{"x":[1,2]},"Extra":null})");
    REQUIRE(b.isOk());
    CHECK(b.value().node == "n");
    auto args = mustDecodeArgs(
        R"({"Pod":{"metadata":{"name":"p","uid":"u","newField":1},"spec":{"containers":[{"name":"c","resizePolicy":[],"resources":{"limits":{"nvidia.com/gpu":"2"}}}]},"status":{"phase":"Pending","future":true}},"Nodes":null,"NodeNames":["a"],"Version":"v2"})");
    CHECK(args.pod.ns == "default");  // namespace defaults like kubectl's
    REQUIRE(args.pod.containers.size() == 1);
    CHECK(args.pod.containers[0].limits.at("nvidia.com/gpu") == "2");
  }
  SECTION("init containers, sidecars and numeric quantities") {
    auto args = mustDecodeArgs(
        R"({"Pod":{"metadata":{"name":"p","namespace":"n","uid":"u"},"spec":{"initContainers":[{"name":"s","restartPolicy":"Always","resources":{"requests":{"nvidia.com/gpu":1}}},{"name":"i","resources":{"limits":{"nvidia.com/gpu":"3"}}}],"containers":[{"name":"c","resources":{"limits":{"nvidia.com/gpu":"2"},"requests":null}}],"nodeName":"node-x","priority":7}},"NodeNames":["a"]})");
    REQUIRE(args.pod.init_containers.size() == 2);
    CHECK(args.pod.init_containers[0].restartable_init);
    CHECK(args.pod.init_containers[0].requests.at("nvidia.com/gpu") == "1");
    CHECK_FALSE(args.pod.init_containers[1].restartable_init);
    CHECK(args.pod.node_name == "node-x");
    CHECK(args.pod.priority == 7);
    auto req = troupe::sched::parseGpuRequest(args.pod);
    REQUIRE(req.isOk());
    CHECK(req.value().gpus == 4);  // max(2 + 1 sidecar, 1 + 3 init)
  }
}

TEST_CASE("wire: malformed requests are InvalidArgument naming the field", "[wire]") {
  struct Bad {
    const char* what;
    std::string body;
    const char* fragment;
  };
  const std::string pod = R"({"metadata":{"name":"p","namespace":"n","uid":"u"}})";
  const Bad args_cases[] = {
      {"empty body", "", "empty"},
      {"malformed JSON", R"({"Pod":)", "not valid JSON"},
      {"not JSON at all", "hello", "not valid JSON"},
      {"an array", "[]", "JSON object"},
      {"missing Pod", R"({"NodeNames":["a"]})", "Pod"},
      {"null Pod", R"({"Pod":null,"NodeNames":["a"]})", "Pod"},
      {"Pod not an object", R"({"Pod":"p","NodeNames":["a"]})", "Pod"},
      {"Pod without metadata", R"({"Pod":{},"NodeNames":["a"]})", "Pod.metadata"},
      {"Pod without a name", R"({"Pod":{"metadata":{"uid":"u"}},"NodeNames":["a"]})", "Pod.metadata.name"},
      {"NodeNames not an array", R"({"Pod":)" + pod + R"(,"NodeNames":"a"})", "NodeNames"},
      {"NodeNames of numbers", R"({"Pod":)" + pod + R"(,"NodeNames":[1,2]})", "NodeNames"},
      {"neither NodeNames nor Nodes", R"({"Pod":)" + pod + R"(,"Nodes":null,"NodeNames":null})", "NodeNames"},
      {"Nodes without items", R"({"Pod":)" + pod + R"(,"Nodes":{"metadata":{}}})", "Nodes.items"},
      {"a node without a name", R"({"Pod":)" + pod + R"(,"Nodes":{"items":[{"metadata":{}}]}})",
       "Nodes.items[0]"},
      {"containers not an array",
       R"({"Pod":{"metadata":{"name":"p"},"spec":{"containers":{}}},"NodeNames":[]})", "Pod.spec.containers"},
      {"limits not an object",
       R"({"Pod":{"metadata":{"name":"p"},"spec":{"containers":[{"resources":{"limits":[]}}]}},"NodeNames":[]})",
       "Pod.spec.containers[0].resources.limits"},
      {"a quantity of the wrong type",
       R"({"Pod":{"metadata":{"name":"p"},"spec":{"containers":[{"resources":{"limits":{"nvidia.com/gpu":true}}}]}},"NodeNames":[]})",
       "nvidia.com/gpu"},
  };
  for (const Bad& c : args_cases) {
    INFO(c.what);
    auto r = troupe::http::decodeExtenderArgs(c.body);
    REQUIRE_FALSE(r.isOk());
    checkInvalid(r.status(), c.fragment);
  }
  const Bad bind_cases[] = {
      {"empty", "", "empty"},
      {"missing PodUID", R"({"PodName":"p","PodNamespace":"ns","Node":"n"})", "PodUID"},
      {"missing Node", R"({"PodName":"p","PodNamespace":"ns","PodUID":"u"})", "ExtenderBindingArgs.Node"},
      {"Node not a string", R"({"PodName":"p","PodNamespace":"ns","PodUID":"u","Node":5})",
       "ExtenderBindingArgs.Node"},
      {"truncated", R"({"PodName":"p")", "not valid JSON"},
  };
  for (const Bad& c : bind_cases) {
    INFO(c.what);
    auto r = troupe::http::decodeBindingArgs(c.body);
    REQUIRE_FALSE(r.isOk());
    checkInvalid(r.status(), c.fragment);
  }
  const Bad preempt_cases[] = {
      {"empty", "", "empty"},
      {"missing Pod", R"({"NodeNameToMetaVictims":{}})", "Pod"},
      {"victims not a map", R"({"Pod":)" + pod + R"(,"NodeNameToMetaVictims":[1]})", "victims"},
      {"a victim without UID", R"({"Pod":)" + pod + R"(,"NodeNameToMetaVictims":{"n1":{"Pods":[{}]}}})",
       "n1"},
      {"a full victim without metadata.uid",
       R"({"Pod":)" + pod + R"(,"NodeNameToVictims":{"n2":{"Pods":[{"metadata":{"name":"v"}}]}}})", "UID"},
  };
  for (const Bad& c : preempt_cases) {
    INFO(c.what);
    auto r = troupe::http::decodePreemptionArgs(c.body);
    REQUIRE_FALSE(r.isOk());
    checkInvalid(r.status(), c.fragment);
  }
}

TEST_CASE("wire: preemption requests without candidates decode to none", "[wire]") {
  const std::string pod = R"({"metadata":{"name":"p","namespace":"n","uid":"u"}})";
  auto none =
      mustDecodePreemption(R"({"Pod":)" + pod + R"(,"NodeNameToVictims":null,"NodeNameToMetaVictims":null})");
  CHECK(none.victims.empty());
  auto null_node = mustDecodePreemption(R"({"Pod":)" + pod + R"(,"NodeNameToMetaVictims":{"n":null}})");
  CHECK(null_node.victims.at("n").empty());
}

TEST_CASE("wire: nodes take capacity when allocatable lacks the GPU resource", "[wire]") {
  auto n = troupe::adapters::nodeFromJson(Json::parse(
      R"({"metadata":{"name":"x","labels":{"a":"b","n":3}},"spec":{"unschedulable":true},"status":{"capacity":{"nvidia.com/gpu":"4"},"allocatable":{"cpu":"8"}}})"));
  REQUIRE(n.isOk());
  CHECK(n.value().allocatable_gpus == "4");
  CHECK(n.value().unschedulable);
  CHECK(n.value().labels == troupe::model::StringMap{{"a", "b"}});  // non-string values skipped
  auto no_meta = troupe::adapters::nodeFromJson(Json::parse(R"({"status":{}})"));
  REQUIRE_FALSE(no_meta.isOk());
  CHECK_THAT(no_meta.status().message(), Catch::Contains("metadata"));
}

namespace {

// What the encoders must produce, built the slow way with the JSON library.
std::string referenceFilterResult(const troupe::http::ExtenderArgs& args,
                                  const troupe::sched::FilterResult& r) {
  using troupe::http::OrderedJson;
  OrderedJson out = OrderedJson::object();
  if (args.node_cache_mode) {
    out["Nodes"] = nullptr;
    out["NodeNames"] = r.passed;
  } else {
    OrderedJson items = OrderedJson::array();
    for (size_t i = 0, next = 0; i < args.node_names.size() && next < r.passed.size(); ++i) {
      if (args.node_names[i] == r.passed[next]) {
        items.push_back(Json::parse(args.node_objects[i]));
        ++next;
      }
    }
    out["Nodes"] = OrderedJson{{"metadata", OrderedJson::object()}, {"items", items}};
    out["NodeNames"] = nullptr;
  }
  auto reasons = [](const troupe::sched::NodeReasons& rs) {
    if (rs.empty()) return OrderedJson(nullptr);
    OrderedJson o = OrderedJson::object();
    for (const auto& [node, why] : rs) o[node] = why;
    return o;
  };
  out["FailedNodes"] = reasons(r.failed);
  out["FailedAndUnresolvableNodes"] = reasons(r.unresolvable);
  out["Error"] = "";
  return out.dump();
}

}  // namespace

TEST_CASE("wire: hand-written encoders write the JSON library's bytes", "[wire]") {
  const std::string texts[] = {
      "gpu-node-a1",
      "",
      "troupe: reason with \"quotes\" and a \\ backslash",
      "only \"quotes\"",
      "only a \\ backslash",
      "line\nbreak\tand tab",
      std::string("ctl\x01\x1f", 5),
      "del\x7f",
      "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac",  // UTF-8: é and 日本
      "html <b> & </b>",
      "/slash/",
  };
  for (const std::string& t : texts) {
    INFO("text: " << t);
    troupe::http::ExtenderArgs args;
    args.node_names = {t, "other"};
    troupe::sched::FilterResult r;
    r.passed = {t};
    r.failed.add(t, t);
    r.unresolvable.add("z" + t, t + t);
    CHECK(troupe::http::encodeFilterResult(args, r) == referenceFilterResult(args, r));
    r.failed.clear();
    CHECK(troupe::http::encodeFilterResult(args, r) == referenceFilterResult(args, r));

    troupe::http::OrderedJson list = troupe::http::OrderedJson::array();
    list.push_back({{"Host", t}, {"Score", 10}});
    list.push_back({{"Host", "b"}, {"Score", 0}});
    CHECK(troupe::http::encodeHostPriorityList({{t, 10}, {"b", 0}}) == list.dump());
    CHECK(parse(troupe::http::encodeBindingResult(t))["Error"] == t);
  }
  // Many survivors and reasons, in full-object mode too.
  troupe::http::ExtenderArgs full;
  full.node_cache_mode = false;
  troupe::sched::FilterResult r;
  for (int i = 0; i < 50; ++i) {
    const std::string name = "node-" + std::to_string(i);
    full.node_names.push_back(name);
    full.node_objects.push_back(R"({"metadata":{"name":")" + name +
                                R"(","labels":{"z":"1","a":"2"}},"status":{"n":[1,2.5,null,true]}})");
    if (i % 3 == 0)
      r.passed.push_back(name);
    else if (i % 3 == 1)
      r.failed.add(name, "busy");
    else
      r.unresolvable.add(name, "never");
  }
  CHECK(troupe::http::encodeFilterResult(full, r) == referenceFilterResult(full, r));
}

TEST_CASE("wire: request bodies parse to the same document as Json::parse", "[wire]") {
  // Nested objects in arrays in objects, empty containers, duplicate keys (first position,
  // last value), numbers of every kind, unicode escapes: all inside a node object, which the
  // decoder keeps and hands back verbatim in full-object mode.
  const std::string node =
      R"({"metadata":{"name":"n1","labels":{"b":"1","a":"2","b":"3"},"annotations":{}},)"
      R"("spec":{"taints":[{"key":"k","effect":"NoSchedule"},{}],"podCIDRs":[]},)"
      R"("status":{"capacity":{"nvidia.com/gpu":"8"},"deep":[[1,[2,[3,{"x":[{"y":{"z":[]}}]}]]],[],{}],)"
      R"("nums":[0,-1,18446744073709551615,-9223372036854775808,1.5,-2.5e-3,1e300],)"
      R"("text":"\u00e9\u65e5\n\"q\"","flags":[true,false,null]}})";
  const std::string body = R"({"Pod":{"metadata":{"name":"p"}},"Nodes":{"metadata":{},"items":[)" + node +
                           "," + node + R"(]},"NodeNames":null})";
  auto args = mustDecodeArgs(body);
  REQUIRE(args.node_objects.size() == 2);
  const Json want = Json::parse(node);
  for (const std::string& got : args.node_objects) {
    CHECK(got == node);  // the received bytes
    CHECK(Json::parse(got) == want);
  }
  CHECK(args.nodes[0].labels == troupe::model::StringMap{{"a", "2"}, {"b", "3"}});
  CHECK(args.nodes[0].allocatable_gpus == "8");

  // Duplicate top-level keys: the last value wins, as Go's decoder does.
  auto dup = mustDecodeArgs(R"({"Pod":{"metadata":{"name":"p"}},"NodeNames":["a"],"NodeNames":["b","c"]})");
  CHECK(dup.node_names == std::vector<std::string>{"b", "c"});

  for (const char* bad : {R"({"Pod":{}} trailing)", R"({"Pod":{"metadata":{"name":"p"}},"NodeNames":["a"]}})",
                          R"({"a":[1,2})", "{\"a\":\"\xff\"}", "nul"}) {
    INFO(bad);
    auto r = troupe::http::decodeExtenderArgs(bad);
    REQUIRE_FALSE(r.isOk());
    checkInvalid(r.status(), "not valid JSON");
  }
}

namespace {

const std::string kTinyPod = R"({"metadata":{"name":"p","namespace":"n","uid":"u"}})";

std::string fullBody(const std::vector<std::string>& nodes) {
  std::string items;
  for (const std::string& n : nodes) items += (items.empty() ? "" : ",") + n;
  return R"({"Pod":)" + kTinyPod + R"(,"Nodes":{"metadata":{},"items":[)" + items + R"(]},"NodeNames":null})";
}

}  // namespace

TEST_CASE("wire: full-node decoding reads each node as nodeFromJson does", "[wire]") {
  // Node shapes, odd ones included: the streaming reader must give the DOM path's facts, or
  // its error, for every one of them.
  const std::vector<std::string> nodes = {
      R"({"metadata":{"name":"a"}})",
      R"({"metadata":{"name":"a"},"status":{"allocatable":{"nvidia.com/gpu":"8"},"capacity":{"nvidia.com/gpu":"9"}}})",
      R"({"metadata":{"name":"a"},"status":{"allocatable":{"cpu":"8"},"capacity":{"nvidia.com/gpu":"4"}}})",
      R"({"metadata":{"name":"a"},"status":{"allocatable":{"nvidia.com/gpu":""},"capacity":{"nvidia.com/gpu":"4"}}})",
      R"({"metadata":{"name":"a"},"status":{"allocatable":{"nvidia.com/gpu":8}}})",
      R"({"metadata":{"name":"a"},"status":{"allocatable":{"nvidia.com/gpu":8.0}}})",
      R"({"metadata":{"name":"a"},"status":{"allocatable":{"nvidia.com/gpu":-1}}})",
      R"({"metadata":{"name":"a"},"status":{"allocatable":{"nvidia.com/gpu":1e2}}})",
      R"({"metadata":{"name":"a"},"status":{"allocatable":{"nvidia.com/gpu":18446744073709551615}}})",
      R"({"metadata":{"name":"a"},"status":{"allocatable":{"nvidia.com/gpu":true},"capacity":{"nvidia.com/gpu":"2"}}})",
      R"({"metadata":{"name":"a"},"status":{"allocatable":{"nvidia.com/gpu":null}}})",
      R"({"metadata":{"name":"a"},"status":{"allocatable":[1],"capacity":{"NVIDIA.com/GPU":"3"}}})",
      R"({"metadata":{"name":"a"},"status":{"Allocatable":{"NVIDIA.COM/GPU":"5","nvidia.com/gpu":"6"}}})",
      R"({"metadata":{"name":"a"},"status":{"allocatable":{"Nvidia.com/gpu":"5","NVIDIA.com/gpu":"6"}}})",
      R"({"metadata":{"name":"a"},"status":{"allocatable":{"nvidia.com/gpu":"5","nvidia.com/gpu":"7"}}})",
      R"({"metadata":{"name":"a"},"status":"gone"})",
      R"({"Metadata":{"Name":"ci","LABELS":{"x":"y"}}})",
      R"({"metadata":{"name":"exact"},"METADATA":{"name":"folded"}})",
      R"({"METADATA":{"name":"first"},"Metadata":{"name":"second"},"METADATA":{"name":"third"}})",
      R"({"metadata":{"name":"one","labels":{"a":"1"}},"metadata":{"name":"two"}})",
      R"({"metadata":{"name":"a","labels":{"k":"1","k":2}}})",
      R"({"metadata":{"name":"a","labels":{"k":2,"k":"1","j":{"x":"y"},"i":["z"]}}})",
      R"({"metadata":{"name":"a","labels":null,"annotations":[1]}})",
      R"({"metadata":{"name":"a","labels":{"caf\u00e9":"\ud83d\ude00","q":"a\"b\\c\nd\/e","raw":"日本"}}})",
      R"({"metadata":{"name":"gpu-\u006eode-1","annotations":{"troupe.dev/gpu-topology":"[[\"X\",\"NV18\"],[\"NV18\",\"X\"]]"}}})",
      R"({"metadata":{"name":"a"},"spec":{"unschedulable":true}})",
      R"({"metadata":{"name":"a"},"spec":{"unschedulable":false}})",
      R"({"metadata":{"name":"a"},"spec":{"unschedulable":"true"}})",
      R"({"metadata":{"name":"a"},"spec":{"unschedulable":1}})",
      R"({"metadata":{"name":"a"},"spec":{"Unschedulable":true,"unschedulable":null}})",
      R"({"metadata":{"name":"a"},"Spec":{"UNSCHEDULABLE":true}})",
      R"({"metadata":{"name":"a"},"spec":[true]})",
      R"({"metadata":{"name":"a","managedFields":[{"fieldsV1":{"f:metadata":{"f:labels":{".":{}}}}}]},"status":{"images":[{"names":["a","b"],"sizeBytes":123}],"conditions":[]}})",
      // Errors, with nodeFromJson's words.
      R"({"metadata":{"name":5}})",
      R"({"metadata":{"name":""}})",
      R"({"metadata":{"uid":"x"}})",
      R"({"metadata":"x"})",
      R"({"metadata":null})",
      R"({"spec":{}})",
      R"({})",
      R"("node")",
      R"(5)",
      R"(null)",
      R"([])",
  };
  for (const std::string& node : nodes) {
    INFO("node: " << node);
    const auto want = troupe::adapters::nodeFromJson(Json::parse(node));
    const auto got = troupe::http::decodeExtenderArgs(fullBody({node}));
    if (!want.isOk()) {
      REQUIRE_FALSE(got.isOk());
      CHECK(got.status().code() == Code::kInvalidArgument);
      CHECK(got.status().message() == "ExtenderArgs.Nodes.items[0]: " + want.status().message());
      continue;
    }
    INFO(got.status().message());
    REQUIRE(got.isOk());
    REQUIRE(got.value().nodes.size() == 1);
    const auto& n = got.value().nodes[0];
    CHECK(n.name == want.value().name);
    CHECK(n.labels == want.value().labels);
    CHECK(n.annotations == want.value().annotations);
    CHECK(n.allocatable_gpus == want.value().allocatable_gpus);
    CHECK(n.unschedulable == want.value().unschedulable);
    CHECK(got.value().node_names == std::vector<std::string>{want.value().name});
    CHECK(got.value().node_objects == std::vector<std::string>{node});
  }
}

TEST_CASE("wire: full-node answers hand back each node object's bytes verbatim", "[wire]") {
  // Whitespace, escapes the library would write differently (\/, \u003c as Go writes '<'),
  // raw UTF-8 and key order: none of it is re-encoded.
  const std::string a =
      "{ \"metadata\" : {\"name\":\"a\",\"labels\":{\"z\":\"\\u003cb\\u003e\",\"a\":\"x\\/y\"}},\n"
      "  \"status\":{\"capacity\":{\"nvidia.com/gpu\":\"8\"},\"note\":\"caf\xc3\xa9\"} }";
  const std::string b = R"({"metadata":{"name":"b"},"status":{"capacity":{"nvidia.com/gpu":"8"}}})";
  const std::string body = "{\"Pod\":" + kTinyPod + ",\"Nodes\":{\"items\":[ " + a + " ,\n" + b + "]}}";
  auto args = mustDecodeArgs(body);
  REQUIRE(args.node_objects == std::vector<std::string>{a, b});
  CHECK(args.nodes[0].labels.at("z") == "<b>");
  CHECK(args.nodes[0].labels.at("a") == "x/y");
  troupe::sched::FilterResult r;
  r.passed = {"a", "b"};
  const std::string out = troupe::http::encodeFilterResult(args, r);
  CHECK(out ==
        "{\"Nodes\":{\"metadata\":{},\"items\":[" + a + "," + b +
            "]},\"NodeNames\":null,\"FailedNodes\":null,\"FailedAndUnresolvableNodes\":null,\"Error\":\"\"}");
  CHECK(parse(out)["Nodes"]["items"][0] == Json::parse(a));
}

TEST_CASE("wire: Nodes null, absent or oddly shaped", "[wire]") {
  const std::string pod = R"({"Pod":)" + kTinyPod;
  struct Case {
    const char* what;
    std::string body;
    const char* error;  // nullptr: decodes
  };
  const Case cases[] = {
      {"Nodes absent", pod + "}", "neither NodeNames nor Nodes"},
      {"Nodes null", pod + R"(,"Nodes":null})", "neither NodeNames nor Nodes"},
      {"Nodes and NodeNames null", pod + R"(,"Nodes":null,"NodeNames":null})", "neither NodeNames nor Nodes"},
      {"items null", pod + R"(,"Nodes":{"items":null}})", "Nodes.items must be an array"},
      {"items an object", pod + R"(,"Nodes":{"items":{}}})", "Nodes.items must be an array"},
      {"Nodes an array", pod + R"(,"Nodes":[]})", "Nodes.items must be an array"},
      {"Nodes a string", pod + R"(,"Nodes":"x"})", "Nodes.items must be an array"},
      {"third node bad",
       pod + R"(,"Nodes":{"items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}},7]}})",
       "ExtenderArgs.Nodes.items[2]: each node must be a v1.Node object"},
      {"a broken node is invalid JSON first", pod + R"(,"Nodes":{"items":[7,{"metadata":{"name":"b"]}]}})",
       "not valid JSON"},
      {"the Pod is checked before the nodes", R"({"Nodes":{"items":[7]},"Pod":{}})", "Pod.metadata"},
      {"invalid JSON after everything", pod + R"(,"NodeNames":["a"],"x":[})", "not valid JSON"},
      {"empty items", pod + R"(,"Nodes":{"items":[]}})", nullptr},
      {"NodeNames win over Nodes, which are not checked",
       pod + R"(,"Nodes":{"items":[7]},"NodeNames":["a"]})", nullptr},
      {"case-insensitive items", pod + R"(,"nodes":{"ITEMS":[{"metadata":{"name":"a"}}]}})", nullptr},
  };
  for (const Case& c : cases) {
    INFO(c.what << ": " << c.body);
    auto r = troupe::http::decodeExtenderArgs(c.body);
    if (c.error) {
      REQUIRE_FALSE(r.isOk());
      checkInvalid(r.status(), c.error);
    } else {
      INFO(r.status().message());
      CHECK(r.isOk());
    }
  }
  auto empty = mustDecodeArgs(pod + R"(,"Nodes":{"items":[]}})");
  CHECK_FALSE(empty.node_cache_mode);
  CHECK(empty.nodes.empty());
  CHECK(
      troupe::http::encodeFilterResult(empty, {}) ==
      R"({"Nodes":{"metadata":{},"items":[]},"NodeNames":null,"FailedNodes":null,"FailedAndUnresolvableNodes":null,"Error":""})");
  auto names = mustDecodeArgs(pod + R"(,"Nodes":{"items":[7]},"NodeNames":["a"]})");
  CHECK(names.node_cache_mode);
  CHECK(names.node_names == std::vector<std::string>{"a"});
}

TEST_CASE("wire: node names with escapes and unicode", "[wire]") {
  auto args =
      mustDecodeArgs(R"({"Pod":)" + kTinyPod +
                     R"(,"NodeNames":["gpu-\u006eode","caf\u00e9","日本","q\"b\\s","\ud83d\ude00"]})");
  CHECK(args.node_names ==
        std::vector<std::string>{"gpu-node", "caf\xc3\xa9", "日本", "q\"b\\s", "\xf0\x9f\x98\x80"});
  troupe::sched::FilterResult r;
  r.passed = args.node_names;
  CHECK(parse(troupe::http::encodeFilterResult(args, r))["NodeNames"] == Json(args.node_names));
}

TEST_CASE("wire: a node listed twice is decoded, filtered and answered twice", "[wire]") {
  const std::string n =
      R"({"metadata":{"name":"twin","labels":{"nvidia.com/gpu.product":"NVIDIA-H100-80GB-HBM3"}},"status":{"allocatable":{"nvidia.com/gpu":"8"}}})";
  const std::string n2 =
      R"({"metadata":{"name":"twin"},"status":{"allocatable":{"nvidia.com/gpu":"8"}},"x":1})";
  auto args = mustDecodeArgs(fullBody({n, n2}));
  REQUIRE(args.nodes.size() == 2);
  CHECK(args.node_names == std::vector<std::string>{"twin", "twin"});
  troupe::sched::Scheduler sched(troupe::sched::SchedulerConfig{});
  std::vector<std::string> errors;
  troupe::sched::PodFacts pod = args.pod;
  auto result = sched.filterNodes(pod, args.nodes, &errors);
  CHECK(errors.empty());
  CHECK(result.passed == args.node_names);
  const Json out = parse(troupe::http::encodeFilterResult(args, result));
  REQUIRE(out["Nodes"]["items"].size() == 2);
  CHECK(out["Nodes"]["items"][0] == Json::parse(n));
  CHECK(out["Nodes"]["items"][1] == Json::parse(n2));
}

TEST_CASE("wire: mutated bodies are rejected as invalid JSON exactly when the library rejects them",
          "[wire][json]") {
  // Random byte edits of a full-node body (structure, escapes, UTF-8, numbers): the in-place
  // decoder must call a body invalid JSON if and only if the JSON library does, and never crash.
  const std::string node =
      R"({"metadata":{"name":"n\u00e9-1","labels":{"nvidia.com/gpu.product":"NVIDIA-H100-80GB-HBM3","k":"v\n\"q\""}},)"
      R"("spec":{"unschedulable":false,"taints":[{"key":"a","effect":"NoSchedule"}]},)"
      R"("status":{"allocatable":{"nvidia.com/gpu":"8","cpu":96,"x":-1.5e3},"images":[{"names":["日本"],"sizeBytes":123}]}})";
  const std::string seed = fullBody({node, node}) + " ";
  const std::string alphabet = std::string("{}[],:\"\\/ 0123456789-+.eEtrufalsn\x01\xc3\xa9\xe6\xff", 39);
  uint64_t state = 99;
  auto next = [&](uint64_t n) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (state >> 33) % n;
  };
  int invalid = 0;
  for (int round = 0; round < 3000; ++round) {
    std::string body = seed;
    const int edits = 1 + static_cast<int>(next(3));
    for (int e = 0; e < edits && !body.empty(); ++e) {
      const size_t at = next(body.size());
      const char c = alphabet[next(alphabet.size())];
      switch (next(3)) {
        case 0: body[at] = c; break;
        case 1: body.insert(body.begin() + static_cast<std::ptrdiff_t>(at), c); break;
        default: body.erase(at, 1 + next(4)); break;
      }
    }
    INFO("body: " << Json(body).dump(-1, ' ', true, Json::error_handler_t::replace));
    const auto r = troupe::http::decodeExtenderArgs(body);
    const bool said_invalid = !r.isOk() && r.status().message().find("not valid JSON") != std::string::npos;
    REQUIRE(said_invalid == (!body.empty() && !Json::accept(body)));
    invalid += said_invalid ? 1 : 0;
  }
  CHECK(invalid > 1000);  // most edits break the JSON; the rest exercise the semantic checks
}

TEST_CASE("wire: a pod's scheduling group, gates, node selector and DRA claims are read", "[wire][k8s136]") {
  const Json pod = Json::parse(R"({
    "metadata": {"name": "w-0", "namespace": "ml", "uid": "u-1"},
    "spec": {
      "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "2"}}}],
      "schedulingGroup": {"podGroupName": "train-a"},
      "schedulingGates": [{"name": "kueue.x-k8s.io/topology"}, {"name": ""}],
      "nodeSelector": {"kubernetes.io/hostname": "gpu-3", "odd": 7},
      "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "two-gpus"},
                         {"name": "shared", "resourceClaimName": "shared-claim"}]
    },
    "status": {
      "phase": "Pending",
      "resourceClaimStatuses": [{"name": "gpus", "resourceClaimName": "w-0-gpus-x7k2p"}],
      "extendedResourceClaimStatus": {"resourceClaimName": "w-0-extended-resources-9zq", "requestMappings": []}
    }
  })");
  troupe::Result<troupe::sched::PodFacts> facts = troupe::adapters::podFromJson(pod);
  REQUIRE(facts.isOk());
  const troupe::sched::PodFacts& p = facts.value();
  CHECK(p.scheduling_group == "train-a");
  CHECK(p.scheduling_gates == std::vector<std::string>{"kueue.x-k8s.io/topology"});
  CHECK(p.node_selector == troupe::sched::StringMap{{"kubernetes.io/hostname", "gpu-3"}});
  REQUIRE(p.resource_claims.size() == 2);
  CHECK(p.resource_claims[0] == troupe::sched::PodClaim{"gpus", "w-0-gpus-x7k2p", "two-gpus"});
  CHECK(p.resource_claims[1] == troupe::sched::PodClaim{"shared", "shared-claim", ""});
  CHECK(p.extended_resource_claim == "w-0-extended-resources-9zq");
  // The fingerprint sees the group: the same pod in another group is another request.
  troupe::sched::PodFacts other = p;
  other.scheduling_group = "train-b";
  CHECK(troupe::sched::podFingerprint(p) != troupe::sched::podFingerprint(other));
}
