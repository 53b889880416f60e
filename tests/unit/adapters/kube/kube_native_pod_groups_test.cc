// Native PodGroups (scheduling.k8s.io v1alpha2 on Kubernetes 1.36, v1beta1 on 1.37) in
// Kubernetes mode: the cache reads spec.schedulingPolicy (gang minCount or basic) and the
// topology key from the version the server serves, tells an API that is not served apart from a
// missing object, and the scheduled-condition writer (PodGroupScheduled on v1alpha2,
// PodGroupInitiallyScheduled from v1beta1) patches only its condition, keeps
// lastTransitionTime and never turns True into False. Every case runs against both versions.
#include <catch2/catch.hpp>
#include <sstream>

#include "adapters/common/logger.h"
#include "adapters/kube/podgroups/pod_group_status.h"
#include "adapters/kube/podgroups/pod_groups.h"
#include "support/fixtures.h"
#include "support/kube_test_support.h"
#include "troupe/sched/gang/gang.h"

namespace {

using nlohmann::json;
using troupe::kube::ApiReply;
using troupe::kube::PodGroupApi;
using troupe::kube::PodGroupCache;
using troupe::kube::PodGroupOptions;
using troupe::kube::PodGroupStatusWriter;
using troupe::kube::replyFromHttp;
using troupe::kube::testing::FakeApi;

constexpr const char* kApiGroup = "/apis/scheduling.k8s.io";

// The condition a scheduled PodGroup carries in `version`.
std::string scheduledType(const std::string& version) {
  return version == "v1alpha2" ? "PodGroupScheduled" : "PodGroupInitiallyScheduled";
}

// A kube-apiserver serving (or not) scheduling.k8s.io/<version> podgroups, with their status
// subresource taking strategic merge patches of conditions keyed by type. scheduling.k8s.io/v1
// is served too, as everywhere, but for PriorityClasses only; other versions are 404.
struct NativeServer {
  explicit NativeServer(std::string v = "v1alpha2")
      : version(std::move(v)), kGroup(std::string(kApiGroup) + "/" + version) {}
  std::string version;
  std::string kGroup;
  bool served = true;
  int status = 0;  // answer every object request with this status (0: normal)
  std::map<std::string, json> groups;
  std::vector<std::string> patch_types;

  FakeApi::Hook hook() {
    return [this](const std::string& method, const std::string& path,
                  const std::string& body) -> std::optional<ApiReply> {
      if (path.rfind(kApiGroup, 0) != 0) return std::nullopt;
      if (path == std::string(kApiGroup) + "/v1" && version != "v1")
        return replyFromHttp(200, R"({"kind":"APIResourceList","resources":[{"name":"priorityclasses"}]})");
      if (path.rfind(kGroup, 0) != 0 || (path.size() > kGroup.size() && path[kGroup.size()] != '/'))
        return replyFromHttp(404, R"({"kind":"Status","message":"not found"})");
      if (!served) return replyFromHttp(404, R"({"kind":"Status","message":"not found"})");
      if (path == kGroup)
        return replyFromHttp(200, R"({"kind":"APIResourceList","resources":[{"name":"podgroups"},)"
                                  R"({"name":"podgroups/status"}]})");
      if (status) return replyFromHttp(status, R"({"kind":"Status","message":"scripted"})");
      std::string rest = path.substr(std::string(kGroup).size() + std::string("/namespaces/").size());
      const bool sub = rest.size() > 7 && rest.compare(rest.size() - 7, 7, "/status") == 0;
      if (sub) rest.resize(rest.size() - 7);
      const std::string key = rest.substr(0, rest.find('/')) + "/" + rest.substr(rest.rfind('/') + 1);
      auto it = groups.find(key);
      if (it == groups.end())
        return replyFromHttp(404, R"({"kind":"Status","message":"podgroups not found"})");
      if (method == "GET") return replyFromHttp(200, it->second.dump());
      if (method == "PATCH" && sub) {
        // A strategic merge of status.conditions by type.
        json patch = json::parse(body);
        json& conds = it->second["status"]["conditions"];
        if (!conds.is_array()) conds = json::array();
        for (const json& c : patch["status"]["conditions"]) {
          bool merged = false;
          for (json& have : conds) {
            if (have["type"] == c["type"]) {
              have.update(c);
              merged = true;
            }
          }
          if (!merged) conds.push_back(c);
        }
        return replyFromHttp(200, it->second.dump());
      }
      return replyFromHttp(405, R"({"kind":"Status","message":"method"})");
    };
  }
};

json group(const std::string& name, json policy, json constraints = nullptr,
           const std::string& version = "v1alpha2") {
  json g = {{"apiVersion", "scheduling.k8s.io/" + version},
            {"kind", "PodGroup"},
            {"metadata", {{"name", name}, {"namespace", "ml"}, {"generation", 3}}},
            {"spec", {{"schedulingPolicy", policy}}}};
  if (!constraints.is_null()) g["spec"]["schedulingConstraints"] = constraints;
  return g;
}

json condition(const json& obj, const std::string& version) {
  for (const json& c : obj["status"]["conditions"])
    if (c["type"] == scheduledType(version)) return c;
  return nullptr;
}

}  // namespace

TEST_CASE("kube native PodGroups: minCount, basic and the topology key are read", "[kube][native-podgroup]") {
  const std::string version = GENERATE("v1alpha2", "v1beta1");
  CAPTURE(version);
  FakeApi api;
  NativeServer server(version);
  server.groups["ml/train"] = group("train", {{"gang", {{"minCount", 8}}}},
                                    {{"topology", json::array({{{"key", "troupe.dev/rack"}}})}}, version);
  server.groups["ml/solo"] = group("solo", {{"basic", json::object()}}, nullptr, version);
  server.groups["ml/odd"] = group("odd", {{"gang", {{"minCount", 0}}}}, nullptr, version);
  api.setHook(server.hook());
  std::ostringstream log;
  troupe::adapters::Logger logger(log, troupe::adapters::LogLevel::kDebug);
  PodGroupCache cache(api, logger, PodGroupOptions{}, {}, PodGroupApi::kNative);

  troupe::sched::PodGroupInfo train = cache.lookup("ml", "train");
  REQUIRE(train.min_member);
  CHECK(*train.min_member == 8);
  CHECK_FALSE(train.basic);
  CHECK(train.topology_key == "troupe.dev/rack");
  CHECK(cache.lookup("ml", "train").min_member == 8);
  CHECK(api.count("GET", "/podgroups/train") == 1);  // cached

  troupe::sched::PodGroupInfo solo = cache.lookup("ml", "solo");
  CHECK(solo.basic);
  CHECK_FALSE(solo.min_member);

  troupe::sched::PodGroupInfo odd = cache.lookup("ml", "odd");
  CHECK_FALSE(odd.min_member);
  CHECK_THAT(odd.absent, Catch::Contains("spec.schedulingPolicy.gang.minCount"));

  CHECK(cache.lookup("ml", "none").absent == "PodGroup ml/none does not exist");
  server.status = 403;
  CHECK_THAT(cache.lookup("ml", "secret").absent, Catch::Contains("scheduling.k8s.io"));

  // Forgotten when its gang ends: a group re-created under the name is read afresh.
  server.status = 0;
  server.groups["ml/train"] = group("train", {{"gang", {{"minCount", 2}}}}, nullptr, version);
  cache.forget("ml/train");
  CHECK(cache.lookup("ml", "train").min_member == 2);
}

TEST_CASE("kube native PodGroups: an API that is not served says how to enable it",
          "[kube][native-podgroup]") {
  const std::string version = GENERATE("v1alpha2", "v1beta1");
  CAPTURE(version);
  FakeApi api;
  NativeServer server(version);
  server.served = false;
  api.setHook(server.hook());
  std::ostringstream log;
  troupe::adapters::Logger logger(log, troupe::adapters::LogLevel::kDebug);
  PodGroupCache cache(api, logger, PodGroupOptions{}, {}, PodGroupApi::kNative);
  troupe::sched::PodGroupInfo info = cache.lookup("ml", "train");
  CHECK_FALSE(info.min_member);
  CHECK_THAT(info.absent, Catch::Contains("scheduling.k8s.io/" + version));
  CHECK_THAT(info.absent, Catch::Contains("GenericWorkload"));
  CHECK_THAT(info.absent, Catch::Contains("--runtime-config"));
  CHECK(api.count("GET", "/podgroups/train") == 0);
}

TEST_CASE("kube native PodGroups: the scheduled condition is patched alone and never regresses",
          "[kube][native-podgroup]") {
  const std::string version = GENERATE("v1alpha2", "v1beta1");
  CAPTURE(version);
  FakeApi api;
  NativeServer server(version);
  server.groups["ml/train"] = group("train", {{"gang", {{"minCount", 2}}}}, nullptr, version);
  server.groups["ml/train"]["status"]["conditions"] =
      json::array({{{"type", "DisruptionTarget"}, {"status", "False"}, {"reason", "x"}}});
  api.setHook(server.hook());
  std::ostringstream log;
  troupe::adapters::Logger logger(log, troupe::adapters::LogLevel::kDebug);
  auto wall = std::chrono::system_clock::time_point{} + std::chrono::hours(24 * 365 * 56);
  PodGroupStatusWriter writer(
      api, logger, [&wall] { return wall; }, std::chrono::milliseconds(0));

  // A timeout queued, then the admission: admission wins before anything is written.
  writer.enqueue("ml/train", false, "only 1 of 2 members reached bind");
  writer.enqueue("ml/train", true,
                 "gang ml/train admitted by Troupe: 2 members bound together on node n1 x2");
  writer.enqueue("ml/train", false, "late timeout");
  CHECK(writer.queued() == 1);
  CHECK(writer.flush() == 1);
  json c = condition(server.groups["ml/train"], version);
  REQUIRE(c.is_object());
  CHECK(c["status"] == "True");
  CHECK(c["reason"] == "Scheduled");
  CHECK(c["observedGeneration"] == 3);
  CHECK_THAT(c["message"].get<std::string>(), Catch::Contains("n1"));
  const std::string since = c["lastTransitionTime"];
  // The other condition is untouched: only the scheduled condition was in the patch.
  CHECK(c["type"] == scheduledType(version));
  CHECK(server.groups["ml/train"]["status"]["conditions"].size() == 2);
  const std::vector<FakeApi::Call> calls = api.calls();
  REQUIRE_FALSE(calls.empty());
  const json patch = json::parse(calls.back().body);
  CHECK(patch["status"]["conditions"].size() == 1);
  CHECK(patch["status"].size() == 1);

  // True is never turned into False, and the same condition again is not written.
  writer.enqueue("ml/train", false, "gang ml/train: only 1 of 2 members reached bind");
  CHECK(writer.flush() == 1);  // done, by leaving it alone
  CHECK(condition(server.groups["ml/train"], version)["status"] == "True");
  const int patches = api.count("PATCH", "/status");
  wall += std::chrono::seconds(60);
  writer.enqueue("ml/train", true,
                 "gang ml/train admitted by Troupe: 2 members bound together on node n1 x2");
  writer.flush();
  CHECK(api.count("PATCH", "/status") == patches);
  CHECK(condition(server.groups["ml/train"], version)["lastTransitionTime"] == since);

  // False on a fresh group; a gone group is dropped; an unreachable server is retried, then given up.
  server.groups["ml/big"] = group("big", {{"gang", {{"minCount", 9}}}}, nullptr, version);
  writer.enqueue("ml/big", false, "gang ml/big: only 3 of 9 members reached bind within 20s");
  writer.enqueue("ml/gone", true, "x");
  writer.flush();
  CHECK(condition(server.groups["ml/big"], version)["status"] == "False");
  CHECK(condition(server.groups["ml/big"], version)["reason"] == "Unschedulable");
  CHECK(writer.queued() == 0);
  server.status = 500;
  writer.enqueue("ml/big", true, "admitted");
  for (int i = 0; i < 4; ++i) {
    CHECK(writer.flush() == 0);
    CHECK(writer.queued() == 1);
  }
  writer.flush();
  CHECK(writer.queued() == 0);  // bounded retries
  writer.enqueue("ml/big", true, "admitted");
  writer.drop();  // an inactive replica
  CHECK(writer.queued() == 0);

  // With a settle time, nothing is written before it has passed.
  PodGroupStatusWriter later(api, logger, {}, std::chrono::hours(1));
  later.enqueue("ml/big", true, "admitted");
  CHECK(later.flush() == 0);
  CHECK(later.queued() == 1);
}

TEST_CASE("kube native PodGroups: a child of a CompositePodGroup is refused with what to do, not split",
          "[kube][native-podgroup]") {
  FakeApi api;
  NativeServer server("v1beta1");
  json child = group("workers", {{"gang", {{"minCount", 4}}}}, nullptr, "v1beta1");
  child["spec"]["parentCompositePodGroupName"] = "train";
  server.groups["ml/workers"] = child;
  api.setHook(server.hook());
  std::ostringstream log;
  troupe::adapters::Logger logger(log, troupe::adapters::LogLevel::kDebug);
  PodGroupCache cache(api, logger, PodGroupOptions{}, {}, PodGroupApi::kNative);
  const troupe::sched::PodGroupInfo info = cache.lookup("ml", "workers");
  CHECK(info.composite_parent == "train");

  troupe::sched::PodFacts pod = troupe::testing::gpuPod("w-0", 1);
  pod.ns = "ml";
  pod.scheduling_group = "workers";
  auto refused = troupe::sched::parseGang(pod, std::chrono::minutes(5), info);
  REQUIRE_FALSE(refused.isOk());
  for (const char* part : {"PodGroup ml/workers", "CompositePodGroup train", "multi-level",
                           "spec.parentCompositePodGroupName", "troupe.dev/gang-size"}) {
    CHECK_THAT(refused.status().message(), Catch::Contains(part));
  }
  // The way out the message names: one Troupe gang over the composite's pods.
  pod.annotations[troupe::contract::kGangName] = "train";
  pod.annotations[troupe::contract::kGangSize] = "8";
  auto flat = troupe::sched::parseGang(pod, std::chrono::minutes(5), info);
  REQUIRE(flat.isOk());
  REQUIRE(flat.value());
  CHECK(flat.value()->key == "ml/train");
  CHECK(flat.value()->min_member == 8);
}
